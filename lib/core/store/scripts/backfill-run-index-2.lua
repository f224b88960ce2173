-- backfill-run-index: puts one chunk of a workflow's runs into the (workflow, status) index, for
-- runs created before that index existed (or moved since by an older engine that does not keep
-- it). Each run goes into the index of the status its hash holds, with the score move_index
-- gives it, and out of its workflow's indexes of every other status, unless it is in the index of its
-- status already. The runs are walked with
-- ZSCAN, which returns every run that stays in the zset from the first call to the last at least
-- once; a run seen twice is only added again. Each run's workflow goes into `wfnames`. A run with no workflow or an unknown status is
-- left out: it cannot be listed by status, and reading it by id reports it as corrupt.
-- KEYS[1] index marker "{P}:index:wfstatus"    KEYS[2] the workflow's runs zset
-- ARGV: base token leaseMs cursor count
-- ARGV[1] base "{prefix}:"    ARGV[2] the marker's value while this caller builds the index
-- ARGV[3] marker lease (ms), renewed by every chunk    ARGV[4] ZSCAN cursor ('0' to start)
-- ARGV[5] chunk size (ZSCAN COUNT)
-- Returns { next cursor ('0' when the workflow is done), runs indexed }, or { 'lost' } when the
-- marker is no longer this caller's (another worker finished or took over; nothing was written).
--!include status.lua
--!include writable.lua
--!include keys.lua

local base = ARGV[1]
assert_writable(base)
if redis.call('GET', KEYS[1]) ~= ARGV[2] then return { 'lost' } end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local scan = redis.call('ZSCAN', KEYS[2], ARGV[4], 'COUNT', tonumber(ARGV[5]))
local entries = scan[2]
local known = {}
for _, status in ipairs(STATUSES) do known[status] = true end
local indexed = 0
for i = 1, #entries, 2 do
  local runId, createdAt = entries[i], entries[i + 1]
  local run = redis.call('HMGET', k_run(base, runId), 'status', 'workflow', 'finishedAt')
  local status, workflow = run[1], run[2]
  -- Lists of one live status read the (workflow, status) indexes of the workflows named here.
  if workflow then redis.call('SADD', k_workflow_names(base), workflow) end
  -- A run already in the index of its status was put there by an engine that keeps the index
  -- (a run enqueued before the first worker started, the common case): nothing to do. An entry
  -- it may have left in another status's index was left by an older engine; listing prunes it.
  if status and workflow and known[status] and not redis.call('ZSCORE', k_workflow_status(base, status, workflow), runId) then
    local score = createdAt
    if TERMINAL[status] and run[3] then score = run[3] end
    for _, other in ipairs(STATUSES) do
      if other ~= status then redis.call('ZREM', k_workflow_status(base, other, workflow), runId) end
    end
    redis.call('ZADD', k_workflow_status(base, status, workflow), score, runId)
    indexed = indexed + 1
  end
end
return { scan[1], indexed }
