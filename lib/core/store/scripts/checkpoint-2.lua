-- checkpoint: stores completed step records (or compensation records, for a compensating run), only
-- while the caller still holds the run's lease. The reply tells the worker whether the run was
-- canceled meanwhile. The lease itself is the heartbeat's to extend (every third of a lease).
-- KEYS[1] run hash            KEYS[2] leases zset (unused: kept so the contract reads like finish's)
-- ARGV: runId token now base ...records
-- ARGV[1] run id              ARGV[2] lease token  ARGV[3] now (ms, workflow time)
-- ARGV[4] base ("{prefix}:")
-- ARGV[5..] pairs of step field ("s:<name>"), step record JSON
-- Returns 'ok' | 'canceled' | 'terminated' (the run ended so meanwhile) | 'lost' (lease taken over or run gone)
-- Deletes the run's `crashes` (lease expiries in a row, counted by reap).
-- Writes step.completed / step.failed / retry.scheduled to the event stream (run-events.lua), at the
-- time of each step record (a retry: at `now`).
--!include keys.lua
--!include status.lua
--!include lease.lua
--!include run-events.lua

local run, lost = leased_run(KEYS[1], ARGV[2], HELD, 'workflow', 'crashes')
if not run then return lost end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
-- The attempt made progress: the crashes counted by reap are no longer in a row.
if run[4] then redis.call('HDEL', KEYS[1], 'crashes') end
emit_step_events(ARGV[4], ARGV[1], run[3], ARGV[3], ARGV, 5)
return 'ok'
