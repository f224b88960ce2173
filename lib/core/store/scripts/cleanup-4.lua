-- cleanup: deletes up to a batch of ended runs that finished before the cutoff (retention), oldest
-- first, each with everything it owns (delete_run). Bounded so Redis is never blocked for long;
-- the worker calls it again while it returns a full batch. Only deletes, so no write check: it
-- frees memory on a full Redis.
-- KEYS[1] succeeded index     KEYS[2] failed index    KEYS[3] canceled index
-- KEYS[4] terminated index    (in this order)
-- ARGV: base cutoff batch
-- ARGV[1] base "{prefix}:"    ARGV[2] cutoff (finish time, ms)   ARGV[3] batch size
-- Returns the number of index entries taken: the runs deleted, and entries of runs that have
-- moved to a live status since (those runs stay).
--!include delete-run.lua

local base, budget = ARGV[1], tonumber(ARGV[3])
local ENDED = { 'succeeded', 'failed', 'canceled', 'terminated' }
local taken = 0
for i = 1, #ENDED do
  if budget <= 0 then break end
  local ids = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', ARGV[2], 'LIMIT', 0, budget)
  for _, runId in ipairs(ids) do delete_run(base, runId, ENDED[i], KEYS[i]) end
  taken = taken + #ids
  budget = budget - #ids
end
return taken
