-- wake.lua: waking a scheduled run.
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
