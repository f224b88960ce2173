-- enqueue: creates a run, queued (ready list) or scheduled (runAt in the future), with its indexes
-- and idempotency key; or, with a debounce key, updates the pending run of that key instead.
-- KEYS[1] run hash            KEYS[2] idempotency key (a placeholder when ARGV[9] is '')
-- KEYS[3] debounce key (a placeholder when ARGV[11] is '')
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] workflow name
-- ARGV[4] queue or '' (from the registry)          ARGV[5] maxAttempts or '' (from the registry)
-- ARGV[6] input JSON          ARGV[7] now (ms)    ARGV[8] runAt (ms, 0 = now)
-- ARGV[9] idempotency key or ''                   ARGV[10] idempotency TTL (s)
-- ARGV[11] debounce key or '' ARGV[12] debounce period (ms)   ARGV[13] debounce timeout (ms, 0 = none)
-- ARGV[14..] extra run fields (pairs): mutex, throttle, rateLimit
-- Returns { 'created', runId } | { 'existing', runId } | { 'conflict', runId } | { 'unknown', '' }
--!include common.lua

local base, runId, workflow = ARGV[1], ARGV[2], ARGV[3]
local input = ARGV[6]
local now, runAt = tonumber(ARGV[7]), tonumber(ARGV[8])
local idemKey, debounceKey = ARGV[9], ARGV[11]

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

local availableAt = now
if runAt > now then availableAt = runAt end

if debounceKey ~= '' then
  local period, timeout = tonumber(ARGV[12]), tonumber(ARGV[13])
  local pendingId = redis.call('GET', KEYS[3])
  if pendingId then
    local pendingKey = k_run(base, pendingId)
    local pending = redis.call('HMGET', pendingKey, 'status', 'createdAt', 'queue', 'attempt', 'resume')
    -- Only a run that has never started merges: one waiting or retrying is already under way.
    if pending[1] == 'scheduled' and pending[4] == '0' and not pending[5] then
      -- Trailing edge: the window restarts, the latest input wins, never past first enqueue + timeout.
      local due = math.max(availableAt, now + period)
      if timeout > 0 then due = math.min(due, tonumber(pending[2]) + timeout) end
      redis.call('HSET', pendingKey, 'input', input, 'availableAt', due)
      redis.call('ZADD', k_scheduled(base, pending[3]), due, pendingId)
      redis.call('PEXPIRE', KEYS[3], period + timeout + 60000)
      return { 'existing', pendingId }
    end
  end
  availableAt = math.max(availableAt, now + period)
  if timeout > 0 then availableAt = math.min(availableAt, now + timeout) end
  redis.call('SET', KEYS[3], runId, 'PX', period + timeout + 60000)
end

local extra = {}
for i = 14, #ARGV do extra[#extra + 1] = ARGV[i] end
if idemKey ~= '' then
  extra[#extra + 1] = 'idempotencyKey'
  extra[#extra + 1] = idemKey
  redis.call('SET', KEYS[2], runId .. '|' .. inputHash, 'EX', ARGV[10])
end
create_run(base, runId, workflow, queue, maxAttempts, input, now, availableAt, extra, false)
return { 'created', runId }
