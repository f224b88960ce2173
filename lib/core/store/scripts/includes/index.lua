-- index.lua: the status indexes of a run.
--!include keys.lua
--!include status.lua

-- Moves a run between the (workflow, status) indexes of its workflow, and for an ended status, in
-- or out of that status's index. Score: creation time for live statuses; finish time for terminal
-- ones, so they list most recently finished first and retention walks them oldest first. Only
-- ended statuses have a status index of their own (what retention and pruning walk, and lists of
-- one status read); a live status is the union of its (workflow, status) indexes over the
-- `wfnames` set, and running runs are also in the leases zset. `workflow` is nil only for a
-- corrupt run without one.
local function move_index(base, runId, workflow, from, to, score)
  if from and TERMINAL[from] then redis.call('ZREM', k_status(base, from), runId) end
  if TERMINAL[to] then redis.call('ZADD', k_status(base, to), score, runId) end
  if workflow then
    if from then redis.call('ZREM', k_workflow_status(base, from, workflow), runId) end
    redis.call('ZADD', k_workflow_status(base, to, workflow), score, runId)
  end
end
