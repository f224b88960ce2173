-- fire-events: fans out events emitted for a time that has come (emitAt), in a bounded batch, and
-- starts the event batches (a workflow's `batch` option) whose timeout has passed.
-- KEYS[1] due events zset
-- ARGV: base now batch
-- ARGV[1] base "{prefix}:"    ARGV[2] now (ms)    ARGV[3] batch size
-- Returns the number of events fanned out plus the number of batches started (or put off).
--!include writable.lua
--!include keys.lua
--!include fan-out.lua

local base, now = ARGV[1], tonumber(ARGV[2])
assert_writable(base)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, eventId in ipairs(due) do
  local dataKey = k_event_data(base, eventId)
  local event = redis.call('HMGET', dataKey, 'name', 'payload', 'fields')
  if event[1] then
    fan_out(base, k_event_subs(base, event[1]), eventId, event[1], event[2], event[3] or '', now)
  end
  redis.call('DEL', dataKey)
  redis.call('ZREM', KEYS[1], eventId)
end
local batches = redis.call('ZRANGEBYSCORE', k_batches_due(base), '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, group in ipairs(batches) do start_batch(base, group, now) end
return #due + #batches
