-- enqueue-many: creates many runs in one call (`runMany`), all or none: every item is checked
-- first (idempotency keys, the workflow's registration, flow-control keys this caller cannot
-- compute) without a write, and a conflict, an unknown workflow or such a key stops the call
-- before anything is stored. Then each item is created as `enqueue` creates one: queued or
-- scheduled, debounced into a pending run, or found under its idempotency key (two items of one
-- call with the same key and input are one run).
-- KEYS[1] the first item's run hash (routes the call to the prefix's slot)
-- ARGV: base now ...items
-- ARGV[1] base "{prefix}:"    ARGV[2] now (ms)
-- ARGV[3..] per item, 13 values then its extra run fields: runId workflow queue ('' = from the
--   registry) maxAttempts ('' = from the registry) input runAt (ms, 0 = now) idempotencyKey ('' =
--   none) idempotencyTtlSec debounceKey ('' = none) debouncePeriodMs debounceTimeoutMs localFlow
--   ('1': the caller computed the flow control) extraCount, then extraCount values (pairs)
-- Returns { 'ok', outcome, runId, ... } per item (outcome 'created' or 'existing'), or
--   { 'conflict' | 'unknown' | 'dynamic', item index (0-based), runId or '' } with nothing written
--!include writable.lua
--!include start-run.lua

local base, now = ARGV[1], tonumber(ARGV[2])
assert_writable(base)

local items, at = {}, 3
while at <= #ARGV do
  local count = tonumber(ARGV[at + 12])
  local extra = {}
  for j = 1, count do extra[j] = ARGV[at + 12 + j] end
  items[#items + 1] = { runId = ARGV[at], workflow = ARGV[at + 1], queue = ARGV[at + 2], maxAttempts = ARGV[at + 3],
    input = ARGV[at + 4], runAt = tonumber(ARGV[at + 5]), idemKey = ARGV[at + 6], idemTtl = ARGV[at + 7],
    debounceKey = ARGV[at + 8], period = ARGV[at + 9], timeout = ARGV[at + 10], localFlow = ARGV[at + 11] == '1', extra = extra }
  at = at + 13 + count
end

-- Every check before the first write.
local claimedKeys, dynamicOf = {}, {}
for index, item in ipairs(items) do
  if item.idemKey ~= '' then
    item.inputHash = redis.sha1hex(item.input)
    item.idemRedisKey = k_idempotency(base, item.workflow, item.idemKey)
    local prior = claimedKeys[item.idemRedisKey]
    if prior then
      if prior.hash ~= item.inputHash then return { 'conflict', index - 1, prior.runId } end
      item.existing = prior.runId
    else
      local stored = redis.call('GET', item.idemRedisKey)
      if stored then
        local sep = string.find(stored, '|', 1, true)
        local storedId = string.sub(stored, 1, sep - 1)
        if string.sub(stored, sep + 1) ~= item.inputHash then return { 'conflict', index - 1, storedId } end
        item.existing = storedId
      end
      claimedKeys[item.idemRedisKey] = { hash = item.inputHash, runId = item.existing or item.runId }
    end
  end
  if not item.existing then
    local queue, maxAttempts = workflow_defaults(base, item.workflow, item.queue, item.maxAttempts)
    if not queue then return { 'unknown', index - 1, '' } end
    item.queue, item.maxAttempts = queue, maxAttempts
    if not item.localFlow then
      if dynamicOf[item.workflow] == nil then
        local _, _, dynamic = registry_flow(base, item.workflow)
        dynamicOf[item.workflow] = dynamic
      end
      if dynamicOf[item.workflow] then return { 'dynamic', index - 1, '' } end
    end
  end
end

local reply = { 'ok' }
for _, item in ipairs(items) do
  local outcome, id = 'existing', item.existing
  if not id then
    local extra = item.extra
    if item.idemKey ~= '' then
      extra[#extra + 1] = 'idempotencyKey'
      extra[#extra + 1] = item.idemKey
    end
    local debounce
    if item.debounceKey ~= '' then
      debounce = { key = k_debounce(base, item.workflow, item.debounceKey), period = tonumber(item.period), timeout = tonumber(item.timeout) }
    end
    local started
    id, started = start_run(base, { runId = item.runId, workflow = item.workflow, queue = item.queue, maxAttempts = item.maxAttempts,
      input = item.input, now = now, availableAt = math.max(now, item.runAt), extra = extra, debounce = debounce,
      localFlow = item.localFlow })
    if started == 'created' then
      outcome = 'created'
      if item.idemKey ~= '' then redis.call('SET', item.idemRedisKey, item.runId .. '|' .. item.inputHash, 'EX', item.idemTtl) end
    end
  end
  reply[#reply + 1] = outcome
  reply[#reply + 1] = id
end
return reply
