-- cleanup: deletes up to a batch of ended runs that finished before the cutoff, with their step
-- records, index entries, idempotency key and child/waiter sets, oldest first. Bounded so Redis is never blocked
-- for long; the worker calls it again while it returns a full batch.
-- KEYS[1] succeeded index     KEYS[2] failed index    KEYS[3] canceled index (in this order: the
-- (workflow, status) index entry removed with each run is that of the status its index stands for)
-- ARGV[1] base "{prefix}:"    ARGV[2] cutoff (finish time, ms)   ARGV[3] batch size
-- Returns the number of runs deleted.
--!include keys.lua

local base, budget = ARGV[1], tonumber(ARGV[3])
local ENDED = { 'succeeded', 'failed', 'canceled' }
local deleted = 0
for i = 1, 3 do
  if budget <= 0 then break end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', ARGV[2], 'LIMIT', 0, budget)
  for _, runId in ipairs(ids) do
    local runKey = k_run(base, runId)
    local run = redis.call('HMGET', runKey, 'workflow', 'idempotencyKey')
    if run[1] then
      redis.call('ZREM', k_workflow_runs(base, run[1]), runId)
      redis.call('ZREM', k_workflow_status(base, ENDED[i], run[1]), runId)
      -- An idempotency key must not outlive its run: a new start would get a deleted run's id.
      if run[2] then
        local idemKey = k_idempotency(base, run[1], run[2])
        local value = redis.call('GET', idemKey)
        if value and string.sub(value, 1, #runId + 1) == runId .. '|' then redis.call('DEL', idemKey) end
      end
    end
    redis.call('DEL', runKey, k_children(base, runId), k_waiters(base, runId))
    redis.call('ZREM', KEYS[i], runId)
  end
  deleted = deleted + #ids
  budget = budget - #ids
end
return deleted
