-- prune: deletes up to a batch of ended runs of the given statuses that finished before the
-- cutoff, oldest first within each status, each with everything it owns (delete_run). The client
-- calls it again while it takes a full batch. It reads the status indexes, or a workflow's
-- (workflow, status) indexes, both scored by finish time. Only deletes, so no write check (as
-- cleanup): it frees memory on a full Redis.
-- KEYS[1] succeeded index     KEYS[2] failed index    KEYS[3] canceled index
-- KEYS[4] terminated index    (in this order; each `status:<status>`, or
--         `wfstatus:<status>:<workflow>` for one workflow's runs)
-- ARGV: base cutoff batch succeeded failed canceled terminated
-- ARGV[1] base "{prefix}:"    ARGV[2] cutoff (finish time, ms, exclusive)    ARGV[3] batch size
-- ARGV[4..7] '1' to prune succeeded, failed, canceled, terminated runs (in KEYS order), '0' to keep them
-- Returns { runs deleted, index entries taken }.
--!include delete-run.lua

local base, cutoff, budget = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not cutoff or not budget or budget < 1 then return redis.error_reply('ERR prune needs a numeric cutoff and a batch size >= 1') end
local ENDED = { 'succeeded', 'failed', 'canceled', 'terminated' }
-- Every read first: the deletes below cannot fail half-way on a bad argument.
local batches = {}
for i = 1, #ENDED do
  if ARGV[3 + i] == '1' and budget > 0 then
    local ids = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[2], 'LIMIT', 0, budget)
    batches[i] = ids
    budget = budget - #ids
  end
end
local deleted, taken = 0, 0
for i = 1, #ENDED do
  for _, runId in ipairs(batches[i] or {}) do
    if delete_run(base, runId, ENDED[i], KEYS[i]) then deleted = deleted + 1 end
    taken = taken + 1
  end
end
return { deleted, taken }
