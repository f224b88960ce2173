-- enqueue: creates a run, queued (ready list) or scheduled (runAt in the future), with its indexes
-- and idempotency key, in one step.
-- KEYS[1] run hash            KEYS[2] idempotency key (unused when ARGV[9] is '')
-- KEYS[3] workflow meta hash (read when queue or maxAttempts are not given)
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] workflow name
-- ARGV[4] queue or ''         ARGV[5] maxAttempts or ''
-- ARGV[6] input JSON          ARGV[7] now (ms)    ARGV[8] runAt (ms, 0 = now)
-- ARGV[9] idempotency key or ''                   ARGV[10] idempotency TTL (s)
-- Returns { 'created', runId } | { 'existing', runId } | { 'conflict', runId } | { 'unknown', '' }
--!include common.lua

local base, runId, workflow = ARGV[1], ARGV[2], ARGV[3]
local queue, maxAttempts, input = ARGV[4], ARGV[5], ARGV[6]
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

if queue == '' or maxAttempts == '' then
  local meta = redis.call('HMGET', KEYS[3], 'queue', 'maxAttempts')
  if not meta[1] then return { 'unknown', '' } end
  if queue == '' then queue = meta[1] end
  if maxAttempts == '' then maxAttempts = meta[2] or '1' end
end

local runKey = KEYS[1]
local availableAt = now
if runAt > now then availableAt = runAt end
local status = 'queued'
if availableAt > now then status = 'scheduled' end
redis.call('HSET', runKey, 'workflow', workflow, 'queue', queue, 'status', status, 'input', input,
  'attempt', 0, 'maxAttempts', maxAttempts, 'createdAt', now, 'availableAt', availableAt)
if idemKey ~= '' then
  redis.call('HSET', runKey, 'idempotencyKey', idemKey)
  redis.call('SET', KEYS[2], runId .. '|' .. inputHash, 'EX', ARGV[10])
end
redis.call('ZADD', base .. 'wf:' .. workflow .. ':runs', now, runId)
move_index(base, runId, nil, status, now)
if status == 'scheduled' then
  redis.call('ZADD', k_scheduled(base, queue), availableAt, runId)
else
  redis.call('RPUSH', k_ready(base, queue), runId)
end
return { 'created', runId }
