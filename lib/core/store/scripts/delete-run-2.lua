-- delete-run: deletes one ended run and everything it owns (delete_run in includes/delete-run.lua).
-- A run that has not ended is refused, unless `force`: then it is terminated first (with the
-- unfinished children it waits on, as terminate does) and deleted, in this one call.
-- KEYS[1] run hash            KEYS[2] leases zset
-- ARGV: base runId now force errorJson reason
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] now (ms)
-- ARGV[4] '1' = force         ARGV[5] error JSON (force)    ARGV[6] reason (force)
-- Returns 'ok' when deleted, 'missing', or the status of a live run refused without force
--!include writable.lua
--!include keys.lua
--!include status.lua
--!include capacity.lua
--!include cancel.lua
--!include delete-run.lua

local base, runId = ARGV[1], ARGV[2]
local run = redis.call('HMGET', KEYS[1], 'status', 'workflow', 'mutex')
local status = run[1]
if not status then return 'missing' end
if not TERMINAL[status] then
  if ARGV[4] ~= '1' then return status end
  -- Terminating writes the run's end (and its children's) before the delete: refused up front
  -- on a full Redis, like every script that may grow memory.
  assert_writable(base)
  terminate_run(base, runId, ARGV[3], ARGV[5], ARGV[6])
  -- A queued run's id stays in its ready list, and a claim that pops an id whose run is gone
  -- cannot tell which capacity it was woken for: offer it now.
  if status == 'queued' then offer_capacity(base, run[2], run[3]) end
  status = 'terminated'
end
delete_run(base, runId, status, k_status(base, status))
return 'ok'
