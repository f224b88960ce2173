-- prune-run-index: takes out of a (workflow, status) index the runs that are no longer in that
-- status or no longer exist. Only an engine older than this index moves a run without moving its
-- entry (during a rolling deploy), so a list that meets such an entry skips it and calls this.
-- The status is read here, in the same atomic call as the removal: a run that went back to the
-- index's status since the list read it stays. A run with an unknown status stays too (a list
-- shows it as corrupt). Only deletes, so no write check: it frees memory on a full Redis.
-- KEYS[1] the (workflow, status) index
-- ARGV: base status ...runIds
-- ARGV[1] base "{prefix}:"    ARGV[2] the index's status    ARGV[3..] run ids
-- Returns the number of runs taken out.
--!include status.lua
--!include keys.lua

local base, indexStatus = ARGV[1], ARGV[2]
local known = {}
for _, status in ipairs(STATUSES) do known[status] = true end
local removed = 0
for i = 3, #ARGV do
  local status = redis.call('HGET', k_run(base, ARGV[i]), 'status')
  if not status or (status ~= indexStatus and known[status]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
