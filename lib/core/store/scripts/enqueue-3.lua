-- enqueue: creates a run, queued (ready list) or scheduled (runAt in the future), with its indexes
-- and idempotency key; or, with a debounce key, updates the pending run of that key instead.
-- KEYS[1] run hash            KEYS[2] idempotency key (a placeholder when ARGV[9] is '')
-- KEYS[3] debounce key (a placeholder when ARGV[11] is '')
-- ARGV: base runId workflow queue maxAttempts input now runAt idempotencyKey idempotencyTtlSec
-- ARGV: debounceKey debouncePeriodMs debounceTimeoutMs localFlow ...extra
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] workflow name
-- ARGV[4] queue or '' (from the registry)          ARGV[5] maxAttempts or '' (from the registry)
-- ARGV[6] input JSON          ARGV[7] now (ms)    ARGV[8] runAt (ms, 0 = now)
-- ARGV[9] idempotency key or ''                   ARGV[10] idempotency TTL (s)
-- ARGV[11] debounce key or '' ARGV[12] debounce period (ms)   ARGV[13] debounce timeout (ms, 0 = none)
-- ARGV[14] '1' when the caller has the definition and computed the flow-control keys (ARGV[11..13]
--          and ARGV[15..]); '0' to take the static ones of the registry entry
-- ARGV[15..] extra run fields (pairs): mutex, throttle, rateLimit, and traceparent, tracestate (the
--          trace context of the caller, checked by the client, when tracing is on)
-- Returns { 'created', runId } | { 'existing', runId } | { 'conflict', runId } | { 'unknown', '' }
--   | { 'dynamic', '' } (the workflow computes a flow-control key with a function this caller lacks)
--!include writable.lua
--!include start-run.lua

local base, runId, workflow = ARGV[1], ARGV[2], ARGV[3]
assert_writable(base)
local input = ARGV[6]
local now, runAt = tonumber(ARGV[7]), tonumber(ARGV[8])
local idemKey = ARGV[9]

local inputHash
if idemKey ~= '' then
  inputHash = redis.sha1hex(input)
  local existing = redis.call('GET', KEYS[2])
  if existing then
    local sep = string.find(existing, '|', 1, true)
    local existingId = string.sub(existing, 1, sep - 1)
    if string.sub(existing, sep + 1) ~= inputHash then return { 'conflict', existingId } end
    return { 'existing', existingId }
  end
end

local queue, maxAttempts = workflow_defaults(base, workflow, ARGV[4], ARGV[5])
if not queue then return { 'unknown', '' } end

-- The common start: the caller computed the flow control and there is none, nor an idempotency key.
if ARGV[14] == '1' and ARGV[11] == '' and idemKey == '' and #ARGV < 15 then
  create_run(base, runId, workflow, queue, maxAttempts, input, now, math.max(now, runAt), nil, false)
  return { 'created', runId }
end

local extra, debounce = caller_flow({}, 15, idemKey, ARGV[11] ~= '' and KEYS[3] or '', ARGV[12], ARGV[13])

local id, outcome = start_run(base, { runId = runId, workflow = workflow, queue = queue, maxAttempts = maxAttempts,
  input = input, now = now, availableAt = math.max(now, runAt), extra = extra, debounce = debounce,
  localFlow = ARGV[14] == '1' })
if not id then return { outcome, '' } end
if outcome == 'merged' then return { 'existing', id } end
if idemKey ~= '' then redis.call('SET', KEYS[2], runId .. '|' .. inputHash, 'EX', ARGV[10]) end
return { 'created', runId }
