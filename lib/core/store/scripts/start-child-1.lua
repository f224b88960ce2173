-- start-child: step.runWorkflow / step.emitWorkflow. Creates the child run (unless it exists:
-- its id is deterministic, or comes from an idempotency key) and writes the parent's step record
-- in the same call, so a replayed or recovered parent never starts a second child.
--   mode 'emit': the step's output is the child's id.
--   mode 'race': a branch of step.waitForAny: the child is linked to the parent (cancel cascades to
--   it) and no step record is written; wait-any-2.lua then records the race.
--   mode 'wait': the child is linked to the parent (cancel cascades to it, its result is written
--   into the parent's step record when it ends). If the child already ended, its result is the
--   step record now; otherwise the record says "waiting" until it ends or the deadline passes.
-- KEYS[1] parent run hash
-- ARGV: base runId token field seq attempt now mode childId workflow queue maxAttempts input runAt
-- ARGV: idempotencyKey idempotencyTtlSec deadline localFlow debounceKey debouncePeriodMs debounceTimeoutMs ...extra
-- ARGV[1] base "{prefix}:"    ARGV[2] parent run id   ARGV[3] parent lease token
-- ARGV[4] step field          ARGV[5] step seq        ARGV[6] attempt     ARGV[7] now (ms)
-- ARGV[8] mode 'wait' | 'emit' | 'race'              ARGV[9] child run id (when no idempotency key)
-- ARGV[10] workflow           ARGV[11] queue or ''    ARGV[12] maxAttempts or ''
-- ARGV[13] input JSON         ARGV[14] runAt (ms, 0 = now)
-- ARGV[15] idempotency key or ''  ARGV[16] idempotency TTL (s)  ARGV[17] wait deadline (ms, 0 = none)
-- ARGV[18] '1' when the caller has the child's definition and computed its flow control
--          (ARGV[19..21], ARGV[22..]); '0' to take the registry entry's static keys
-- ARGV[19] debounce key or ''  ARGV[20] debounce period (ms)  ARGV[21] debounce timeout (ms)
-- ARGV[22..] extra child fields (pairs): mutex, throttle, rateLimit, and traceparent, tracestate (the
--          parent attempt's trace context, when tracing is on)
-- Returns { 'lost' } | { 'unknown' } | { 'dynamic' } | { 'conflict', existingId } | { 'ok', childId, stepRecord }
--   stepRecord starts with '[3' while the parent must wait.
--!include writable.lua
--!include lease.lua
--!include keys.lua
--!include start-run.lua
--!include step-record.lua
--!include child-wait.lua

local base, parentId, now = ARGV[1], ARGV[2], tonumber(ARGV[7])
assert_writable(base)
if not leased_run(KEYS[1], ARGV[3], RUNNING) then return { 'lost' } end

local workflow, input, idemKey = ARGV[10], ARGV[13], ARGV[15]
local childId = ARGV[9]
local idemRedisKey = k_idempotency(base, workflow, idemKey)
local inputHash
if idemKey ~= '' then
  inputHash = redis.sha1hex(input)
  local existing = redis.call('GET', idemRedisKey)
  if existing then
    local sep = string.find(existing, '|', 1, true)
    childId = string.sub(existing, 1, sep - 1)
    if string.sub(existing, sep + 1) ~= inputHash then return { 'conflict', childId } end
  end
end

if redis.call('EXISTS', k_run(base, childId)) == 0 then
  local queue, maxAttempts = workflow_defaults(base, workflow, ARGV[11], ARGV[12])
  if not queue then return { 'unknown' } end
  local extra, debounce = caller_flow({ 'parent', parentId }, 22, idemKey, ARGV[19], ARGV[20], ARGV[21])
  local id, outcome = start_run(base, { runId = childId, workflow = workflow, queue = queue, maxAttempts = maxAttempts,
    input = input, now = now, availableAt = math.max(now, tonumber(ARGV[14])), extra = extra, debounce = debounce,
    localFlow = ARGV[18] == '1' })
  if not id then return { outcome } end
  if outcome == 'created' and idemKey ~= '' then redis.call('SET', idemRedisKey, childId .. '|' .. inputHash, 'EX', ARGV[16]) end
  childId = id
end

local field, seq, attempt = ARGV[4], ARGV[5], ARGV[6]
local record
if ARGV[8] == 'race' then
  -- A branch of step.waitForAny: linked for cancel; wait-any-2.lua records and registers the race.
  redis.call('SADD', k_children(base, parentId), childId)
  return { 'ok', childId, '' }
elseif ARGV[8] == 'emit' then
  record = step_done(true, seq, attempt, now, cjson.encode(childId))
else
  redis.call('SADD', k_children(base, parentId), childId)
  record = wait_on_child(base, parentId, field, childId, step_waiting_child(seq, attempt, childId, ARGV[17], now), now)
end
redis.call('HSET', KEYS[1], field, record)
return { 'ok', childId, record }
