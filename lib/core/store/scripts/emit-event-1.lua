-- emit-event: fans an event out to every workflow subscribed to it, one run each with the
-- deterministic id "<eventId>.<workflow>" (so a replayed emit creates nothing twice), or stores it
-- for later when emitAt is in the future. Called from a step, it also writes the step's record.
-- Subscriptions of workflows that no longer exist are dropped here.
-- KEYS[1] subscribers set of the event
-- ARGV: base eventId event payload now emitAt idempotencyKey idempotencyTtlSec runId token field seq attempt fields
-- ARGV[1] base "{prefix}:"    ARGV[2] event id    ARGV[3] event name   ARGV[4] payload JSON
-- ARGV[5] now (ms)            ARGV[6] emitAt (ms, 0 = now)
-- ARGV[7] idempotency key or ''                   ARGV[8] idempotency TTL (s)
-- ARGV[9] parent run id or '' (called from a step) ARGV[10] parent lease token
-- ARGV[11] step field         ARGV[12] step seq   ARGV[13] attempt
-- ARGV[14] the payload's top-level scalar fields, '<name>\t<value JSON>' per line (event waits)
-- Returns { 'lost' } | { 'ok', runIds... }
--!include writable.lua
--!include lease.lua
--!include keys.lua
--!include step-record.lua
--!include fan-out.lua

local base, eventId, name, payload = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local now, emitAt, parentId = tonumber(ARGV[5]), tonumber(ARGV[6]), ARGV[9]
assert_writable(base)
local parentKey = k_run(base, parentId)
if parentId ~= '' and not leased_run(parentKey, ARGV[10], RUNNING) then return { 'lost' } end

if ARGV[7] ~= '' then
  local idemKey = k_event_idempotency(base, name, ARGV[7])
  local existing = redis.call('GET', idemKey)
  if existing then eventId = existing else redis.call('SET', idemKey, eventId, 'EX', ARGV[8]) end
end

local runIds = {}
if emitAt > now then
  redis.call('ZADD', k_events_due(base), emitAt, eventId)
  redis.call('HSET', k_event_data(base, eventId), 'name', name, 'payload', payload, 'fields', ARGV[14])
else
  runIds = fan_out(base, KEYS[1], eventId, name, payload, ARGV[14], now)
end

if parentId ~= '' then
  local output = '[]'
  if #runIds > 0 then output = cjson.encode(runIds) end
  redis.call('HSET', parentKey, ARGV[11], step_done(true, ARGV[12], ARGV[13], now, output))
end
local reply = { 'ok' }
for _, id in ipairs(runIds) do reply[#reply + 1] = id end
return reply
