-- prune-run-index: takes out of a (workflow, status) index the runs that are no longer in that
-- status or no longer exist. Only an engine older than this index moves a run without moving its
-- entry (during a rolling deploy), so a list that meets such an entry skips it and calls this.
-- The status is read here, in the same atomic call as the removal: a run that went back to the
-- index's status since the list read it stays. A run with an unknown status stays too (a list
-- shows it as corrupt). Only deletes, so no write check: it frees memory on a full Redis.
-- With `wait` (the start of a `wait` field, "<kind>\n" or "<kind>\n<name>\n"), KEYS[1] is a
-- `waiting:` index instead: a run goes when it is not `scheduled` or its `wait` field does not
-- start with `wait` (every script that ends a wait takes the run out with it; this only mends an
-- index a crash or an edit left behind).
-- KEYS[1] the (workflow, status) index, or a waiting index
-- ARGV: base status wait ...runIds
-- ARGV[1] base "{prefix}:"    ARGV[2] the index's status    ARGV[3] '' or the wait's start    ARGV[4..] run ids
-- Returns the number of runs taken out.
--!include status.lua
--!include keys.lua

local base, indexStatus, wait = ARGV[1], ARGV[2], ARGV[3]
local known = {}
for _, status in ipairs(STATUSES) do known[status] = true end
local removed = 0
for i = 4, #ARGV do
  local run = redis.call('HMGET', k_run(base, ARGV[i]), 'status', 'wait')
  local status = run[1]
  local stale
  if wait ~= '' then
    stale = status ~= 'scheduled' or not run[2] or string.sub(run[2], 1, #wait) ~= wait
  else
    stale = not status or (status ~= indexStatus and known[status])
  end
  if stale then removed = removed + redis.call('ZREM', KEYS[1], ARGV[i]) end
end
return removed
