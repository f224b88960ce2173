-- wait-signal: step.waitForSignal, for the lease holder of a running run. Consumes the oldest
-- buffered signal of the name (its payload becomes the step's record); else, past the deadline,
-- records the timeout (a null payload); else records the wait ([4 ...]) and marks the run as
-- waiting for the name, so that signal-2.lua delivers straight into the record. The caller then
-- suspends the run (finish with the wait outcome) until the signal or the deadline. A record that
-- already holds a payload is returned as it is ('got').
-- KEYS[1] run hash            KEYS[2] signals list of the run
-- ARGV: base runId token field seq attempt name deadline now
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] step field
-- ARGV[5] step seq            ARGV[6] attempt     ARGV[7] signal name   ARGV[8] deadline (ms, 0 = none)
-- ARGV[9] now (ms)
-- Returns { 'lost' } | { 'got' | 'timeout' | 'wait', step record }
--!include step-record.lua
--!include step-wait.lua

local base, token, field, name, now = ARGV[1], ARGV[3], ARGV[4], ARGV[7], ARGV[9]
local waiting, reply = begin_wait(base, KEYS[1], token, field, is_waiting, step_waiting_signal(ARGV[5], ARGV[6], name, ARGV[8], now))
if not waiting then return reply end

local taken, payload = take_signal(KEYS[2], { [name] = true })
if taken then
  local record = resolved_record(waiting, true, payload, now)
  redis.call('HSET', KEYS[1], field, record)
  redis.call('HDEL', KEYS[1], 'sigwait:' .. name)
  return { 'got', record }
end
local record = wait_timed_out(KEYS[1], field, waiting, now)
if record then
  redis.call('HDEL', KEYS[1], 'sigwait:' .. name)
  return { 'timeout', record }
end
redis.call('HSET', KEYS[1], field, waiting, 'sigwait:' .. name, field)
return { 'wait', waiting }
