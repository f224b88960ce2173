-- index.lua: the status indexes of a run.
--!include keys.lua
--!include status.lua

-- The run-hash field `wait` of a scheduled run suspended in a step: "<kind>\n<name>\n<until>",
-- kind sleep, signal, event, child or any (a step.waitForAny race), name the signal's or event's
-- name or the child run's id ('' for sleep and any), until the time it is due to wake (ms, 0 =
-- none). Written by finish with the suspension; the run is then in `waiting:<kind>` and, for a
-- signal or an event, in `waiting:<kind>:<name>` (scored by creation time). `clear_wait` takes
-- both away the moment the run leaves `scheduled` (move_index), however it leaves.

-- The index keys of a run's `wait` value.
local function wait_keys(base, wait)
  local kind, name = string.match(wait, '^([^\n]*)\n([^\n]*)')
  if not kind then return {} end
  if name ~= '' and (kind == 'signal' or kind == 'event') then return { k_waiting(base, kind), k_waiting_for(base, kind, name) } end
  return { k_waiting(base, kind) }
end

-- Indexes a run under the wait `wait` (the caller writes the field, with its own HSET).
local function index_wait(base, runId, wait, score)
  for _, key in ipairs(wait_keys(base, wait)) do redis.call('ZADD', key, score, runId) end
end

-- A run that leaves `scheduled` waits for nothing: its `wait` field and index entries go.
local function clear_wait(base, runId)
  local runKey = k_run(base, runId)
  local wait = redis.call('HGET', runKey, 'wait')
  if not wait then return end
  redis.call('HDEL', runKey, 'wait')
  for _, key in ipairs(wait_keys(base, wait)) do redis.call('ZREM', key, runId) end
end

-- Moves a run between the (workflow, status) indexes of its workflow, and for an ended status, in
-- or out of that status's index. Score: creation time for live statuses; finish time for terminal
-- ones, so they list most recently finished first and retention walks them oldest first. Only
-- ended statuses have a status index of their own (what retention and pruning walk, and lists of
-- one status read); a live status is the union of its (workflow, status) indexes over the
-- `wfnames` set, and running runs are also in the leases zset. `workflow` is nil only for a
-- corrupt run without one. A run that leaves `scheduled` loses its wait (clear_wait).
local function move_index(base, runId, workflow, from, to, score)
  if from == 'scheduled' then clear_wait(base, runId) end
  if from and TERMINAL[from] then redis.call('ZREM', k_status(base, from), runId) end
  if TERMINAL[to] then redis.call('ZADD', k_status(base, to), score, runId) end
  if workflow then
    if from then redis.call('ZREM', k_workflow_status(base, from, workflow), runId) end
    redis.call('ZADD', k_workflow_status(base, to, workflow), score, runId)
  end
end
