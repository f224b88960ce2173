-- index.lua: the status indexes of a run.
--!include keys.lua

-- Moves a run between status indexes, and between the (workflow, status) indexes of its
-- workflow. Score: creation time for live statuses; finish time for terminal ones, so they list
-- most recently finished first and retention walks them oldest first. Running runs have no status
-- index (the leases zset lists them), but do have a (workflow, status) index, scored by creation
-- time like the other live statuses. `workflow` is nil only for a corrupt run without one.
local function move_index(base, runId, workflow, from, to, score)
  if from and from ~= 'running' then redis.call('ZREM', k_status(base, from), runId) end
  if to ~= 'running' then redis.call('ZADD', k_status(base, to), score, runId) end
  if workflow then
    if from then redis.call('ZREM', k_workflow_status(base, from, workflow), runId) end
    redis.call('ZADD', k_workflow_status(base, to, workflow), score, runId)
  end
end
