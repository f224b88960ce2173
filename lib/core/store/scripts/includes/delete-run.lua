-- delete-run.lua: the one place a run is deleted, with everything it owns. Retention (cleanup)
-- and prune both delete runs through delete_run.
--!include keys.lua

-- Deletes an ended run read from `indexKey`, the status index or the (workflow, status) index of
-- `status`: its hash (step records included), its entries in the status and (workflow, status)
-- indexes (and in the workflow's runs index an engine before version 7 kept), its idempotency key (while that still names it), its children and waiters
-- sets and its signal buffer. An entry whose run has since moved to another status (only an
-- engine older than the (workflow, status) index leaves one) just leaves `indexKey`: the run stays.
-- Returns true when a run was deleted.
local function delete_run(base, runId, status, indexKey)
  redis.call('ZREM', indexKey, runId)
  local runKey = k_run(base, runId)
  local run = redis.call('HMGET', runKey, 'workflow', 'idempotencyKey', 'status')
  if run[3] and run[3] ~= status then return false end
  redis.call('ZREM', k_status(base, status), runId)
  if run[1] then
    redis.call('ZREM', k_workflow_runs(base, run[1]), runId)
    redis.call('ZREM', k_workflow_status(base, status, run[1]), runId)
    -- An idempotency key must not outlive its run: a new start would get a deleted run's id.
    if run[2] then
      local idemKey = k_idempotency(base, run[1], run[2])
      local value = redis.call('GET', idemKey)
      if value and string.sub(value, 1, #runId + 1) == runId .. '|' then redis.call('DEL', idemKey) end
    end
  end
  local existed = redis.call('DEL', runKey) == 1
  redis.call('DEL', k_children(base, runId), k_waiters(base, runId), k_signals(base, runId))
  return existed
end
