-- wait-event: step.waitForEvent, for the lease holder of a running run. Past the deadline,
-- records the timeout (a null payload) and drops the wait's registration; else records the wait
-- ([5 ...]) and registers it under the event and its match (event-waits.lua), so that an emit with
-- matching fields delivers straight into the record. The caller then suspends the run (finish
-- with the wait outcome) until the event or the deadline. Events emitted before are not kept.
-- KEYS[1] run hash
-- ARGV: base runId token field seq attempt event deadline now matchShape matchHash matchJson
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] step field
-- ARGV[5] step seq            ARGV[6] attempt     ARGV[7] event name    ARGV[8] deadline (ms, 0 = none)
-- ARGV[9] now (ms)            ARGV[10] match shape ARGV[11] match hash  ARGV[12] match JSON
-- Returns { 'lost' } | { 'got' | 'timeout' | 'wait', step record }
--!include step-record.lua
--!include step-wait.lua
--!include event-waits.lua

local base, runId, token, field, event, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[7], ARGV[9]
local shape, hash = ARGV[10], ARGV[11]
local waiting, reply = begin_wait(base, KEYS[1], token, field, is_event_wait, step_waiting_event(ARGV[5], ARGV[6], event, ARGV[8], ARGV[12], now))
if not waiting then return reply end

local record = wait_timed_out(KEYS[1], field, waiting, now)
if record then
  unregister_event_wait(base, runId, event, shape, hash, field)
  return { 'timeout', record }
end
redis.call('HSET', KEYS[1], field, waiting)
register_event_wait(base, runId, event, shape, hash, field)
return { 'wait', waiting }
