-- wake.lua: waking a scheduled run, and handing a waiting run what its step waited for.
--!include keys.lua
--!include index.lua

-- Moves a scheduled run to the front of its queue (a child finished, a parked slot freed).
local function wake(base, runId, run)
  -- run = { status, queue, createdAt, workflow }
  redis.call('ZREM', k_scheduled(base, run[2]), runId)
  redis.call('HSET', k_run(base, runId), 'status', 'queued')
  move_index(base, runId, run[4], run[1], 'queued', run[3])
  redis.call('LPUSH', k_ready(base, run[2]), runId)
end

-- What a run's step waited for happened (a child ended, a signal or an event came, a race was
-- won): writes `record` into the step's `field` and, when the run is suspended (scheduled), wakes
-- it. A nil `record` (a damaged waiting record) is left for the run's replay to report; the run is
-- still woken. run = { status, queue, createdAt, workflow }
local function resolve_wait(base, runId, run, field, record)
  if record then redis.call('HSET', k_run(base, runId), field, record) end
  if run[1] == 'scheduled' then wake(base, runId, run) end
end
