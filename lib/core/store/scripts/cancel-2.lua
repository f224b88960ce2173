-- cancel: makes a queued, scheduled or running run canceled at once, and with it every unfinished
-- child it waits on (step.runWorkflow), recursively (cancel_run in includes/cancel.lua).
-- KEYS[1] run hash            KEYS[2] leases zset
-- ARGV: base runId now errorJson reason cancelChannel compensate
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] now (ms)
-- ARGV[4] error JSON          ARGV[5] reason      ARGV[6] cancel channel
-- ARGV[7] '1': runs with compensations to run become `compensating` instead (cancelRun({ compensate }))
-- Returns 'ok' when canceled now, else the unchanged terminal status, or 'missing'
--!include writable.lua
--!include cancel.lua

local base = ARGV[1]
assert_writable(base)
return cancel_run(base, ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[7] == '1')
