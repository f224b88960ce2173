-- terminate: ends a queued, scheduled or running run at once as `terminated`, and with it every
-- unfinished child it waits on, recursively (terminate_run in includes/cancel.lua). Unlike cancel
-- it is not cooperative: the worker of a running attempt is told (its AbortSignal aborts and no
-- later step starts), but no compensation or onFailure runs.
-- KEYS[1] run hash            KEYS[2] leases zset
-- ARGV: base runId now errorJson reason
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] now (ms)
-- ARGV[4] error JSON          ARGV[5] reason
-- Returns 'ok' when terminated now, else the unchanged terminal status, or 'missing'
--!include writable.lua
--!include cancel.lua

local base = ARGV[1]
assert_writable(base)
return terminate_run(base, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
