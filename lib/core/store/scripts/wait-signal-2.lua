-- wait-signal: step.waitForSignal, for the lease holder of a running run. Consumes the oldest
-- buffered signal of the name (its payload becomes the step's record); else, past the deadline,
-- records the timeout (a null payload); else records the wait ([4 ...]) and marks the run as
-- waiting for the name, so that signal.lua delivers straight into the record. The caller then
-- suspends the run (finish with the wait outcome) until the signal or the deadline. A record that
-- already holds a payload is returned as it is ('got').
-- KEYS[1] run hash            KEYS[2] signals list of the run
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] step field
-- ARGV[5] step seq            ARGV[6] attempt     ARGV[7] signal name   ARGV[8] deadline (ms, 0 = none)
-- ARGV[9] now (ms)
-- Returns { 'lost' } | { 'got' | 'timeout' | 'wait', step record }
--!include writable.lua
--!include keys.lua
--!include step-record.lua

local base, token, field, name, now = ARGV[1], ARGV[3], ARGV[4], ARGV[7], ARGV[9]
assert_writable(base)
local run = redis.call('HMGET', KEYS[1], 'status', 'lease')
if run[1] ~= 'running' or run[2] ~= token then return { 'lost' } end
local existing = redis.call('HGET', KEYS[1], field)
-- A signal delivered while this run was running (after its claim, before this call), or a retried
-- call whose first reply was lost: the record already holds the payload. Never overwrite it.
if existing and not is_waiting(existing) then return { 'got', existing } end
local waiting = existing
if not is_waiting(existing) then waiting = step_waiting_signal(ARGV[5], ARGV[6], name, ARGV[8]) end

for _, entry in ipairs(redis.call('LRANGE', KEYS[2], 0, -1)) do
  local sep = string.find(entry, '\n', 1, true)
  if string.sub(entry, 1, sep - 1) == name then
    redis.call('LREM', KEYS[2], 1, entry)
    local record = resolved_record(waiting, true, string.sub(entry, sep + 1), now)
    redis.call('HSET', KEYS[1], field, record)
    redis.call('HDEL', KEYS[1], 'sigwait:' .. name)
    return { 'got', record }
  end
end
local deadline = record_deadline(waiting)
if deadline > 0 and tonumber(now) >= deadline then
  local record = resolved_record(waiting, true, 'null', now)
  redis.call('HSET', KEYS[1], field, record)
  redis.call('HDEL', KEYS[1], 'sigwait:' .. name)
  return { 'timeout', record }
end
redis.call('HSET', KEYS[1], field, waiting, 'sigwait:' .. name, field)
return { 'wait', waiting }
