-- start-run.lua: creating a run the same way from every entry point, with its flow control.
--!include keys.lua
--!include index.lua
--!include run-events.lua
--!include ready.lua

-- No more hash fields: `unpack(extra or NO_FIELDS)` adds none (never written to).
local NO_FIELDS = {}

-- Queue and maxAttempts of a workflow from its registry entry; nil when it is not registered.
local function workflow_defaults(base, workflow, queue, maxAttempts)
  if queue ~= '' and maxAttempts ~= '' then return queue, maxAttempts end
  local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'maxAttempts')
  if not meta[1] then return nil end
  if queue == '' then queue = meta[1] end
  if maxAttempts == '' then maxAttempts = meta[2] or '1' end
  return queue, maxAttempts
end

-- Creates a run, queued or (availableAt in the future) scheduled, with its indexes. `extra` holds
-- more hash fields (flow-control keys, parent). With `ifAbsent`, an existing run is left as it is
-- and false is returned: deterministic ids make retried fan-outs and cron ticks idempotent.
local function create_run(base, runId, workflow, queue, maxAttempts, input, now, availableAt, extra, ifAbsent)
  local runKey = k_run(base, runId)
  if ifAbsent and redis.call('EXISTS', runKey) == 1 then return false end
  -- Times go to Redis as text, each number turned into text once.
  local nowText = tostring(now)
  local status, dueText = 'queued', nowText
  if availableAt > now then status, dueText = 'scheduled', tostring(availableAt) end
  redis.call('HSET', runKey, 'workflow', workflow, 'queue', queue, 'status', status, 'input', input,
    'attempt', '0', 'maxAttempts', maxAttempts, 'createdAt', nowText, 'availableAt', dueText, unpack(extra or NO_FIELDS))
  -- The workflows that have runs: lists of one status read their (workflow, status) indexes.
  redis.call('SADD', k_workflow_names(base), workflow)
  move_index(base, runId, workflow, nil, status, nowText)
  if status == 'scheduled' then
    redis.call('ZADD', k_scheduled(base, queue), dueText, runId)
  elseif extra then
    local priority, conc
    for i = 1, #extra, 2 do
      if extra[i] == 'priority' then priority = extra[i + 1] elseif extra[i] == 'conc' then conc = extra[i + 1] end
    end
    push_ready(base, queue, runId, now, priority, conc)
  else
    redis.call('RPUSH', k_ready(base, queue), runId)
  end
  emit_event(base, 'run.created', runId, workflow, nowText, nil)
  return true
end

-- Debounce: a start with the key of a run that has never started merges into it (trailing edge:
-- its due time moves to now + period, never past its first start + timeout, and the latest input
-- wins); returns that run's id. Otherwise `runId` becomes the key's pending run, due after the
-- quiet period: returns nil and the new run's due time.
-- d = { key (Redis key), period (ms), timeout (ms, 0 = none) }
local function debounce_start(base, d, runId, input, now, availableAt)
  local pendingId = redis.call('GET', d.key)
  if pendingId then
    local pendingKey = k_run(base, pendingId)
    local pending = redis.call('HMGET', pendingKey, 'status', 'createdAt', 'queue', 'attempt', 'resume')
    -- Only a run that has never started merges: one waiting or retrying is already under way.
    if pending[1] == 'scheduled' and pending[4] == '0' and not pending[5] then
      local due = math.max(availableAt, now + d.period)
      if d.timeout > 0 then due = math.min(due, tonumber(pending[2]) + d.timeout) end
      redis.call('HSET', pendingKey, 'input', input, 'availableAt', due)
      redis.call('ZADD', k_scheduled(base, pending[3]), due, pendingId)
      redis.call('PEXPIRE', d.key, d.period + d.timeout + 60000)
      return pendingId
    end
  end
  local due = math.max(availableAt, now + d.period)
  if d.timeout > 0 then due = math.min(due, now + d.timeout) end
  redis.call('SET', d.key, runId, 'PX', d.period + d.timeout + 60000)
  return nil, due
end

-- The flow control of a workflow as its registry entry holds it (static keys only): extra run
-- fields (timeout, priority, conc, mutex, throttle, rateLimit pairs), a debounce spec or nil, and whether the definition
-- computes a key with a function (which only a process holding the definition can run).
local function registry_flow(base, workflow)
  local f = redis.call('HMGET', k_meta(base, workflow), 'fmutex', 'fthrottle', 'frateLimit', 'fdebounce', 'fdynamic', 'ftimeout', 'fpriority', 'fconc')
  local extra = {}
  if f[6] then extra[#extra + 1] = 'timeout'; extra[#extra + 1] = f[6] end
  if f[7] then extra[#extra + 1] = 'priority'; extra[#extra + 1] = f[7] end
  if f[8] then extra[#extra + 1] = 'conc'; extra[#extra + 1] = f[8] end
  if f[1] then extra[#extra + 1] = 'mutex'; extra[#extra + 1] = f[1] end
  if f[2] then extra[#extra + 1] = 'throttle'; extra[#extra + 1] = f[2] end
  if f[3] then extra[#extra + 1] = 'rateLimit'; extra[#extra + 1] = f[3] end
  local debounce
  if f[4] then
    local period, timeout, key = string.match(f[4], '^(%d+)|(%d+)|(.*)$')
    debounce = { key = k_debounce(base, workflow, key), period = tonumber(period), timeout = tonumber(timeout) }
  end
  return extra, debounce, f[5] == '1'
end

-- The flow control a caller computed, as start_run takes it: the extra run fields it sent (pairs
-- from ARGV[first] on, after `extra`), the idempotency key ('' = none) and the debounce spec (nil
-- when `debounceKey` is ''). Shared by enqueue and start-child.
local function caller_flow(extra, first, idemKey, debounceKey, period, timeout)
  for i = first, #ARGV do extra[#extra + 1] = ARGV[i] end
  if idemKey ~= '' then
    extra[#extra + 1] = 'idempotencyKey'
    extra[#extra + 1] = idemKey
  end
  local debounce
  if debounceKey ~= '' then debounce = { key = debounceKey, period = tonumber(period), timeout = tonumber(timeout) } end
  return extra, debounce
end

-- Starts a run the same way from every entry point (enqueue, child, event, cron), with its
-- workflow's flow control: the caller's own (`r.localFlow`: it had the definition and computed
-- the keys, `r.extra` and `r.debounce`) or else the registry entry's static keys.
-- r = { runId, workflow, queue, maxAttempts, input, now, availableAt, extra, debounce, localFlow, ifAbsent }
-- Returns the run id and 'created', 'exists' (ifAbsent and the id exists), 'merged' (debounced
-- into the pending run, whose id is returned) or nil and 'dynamic' (no definition here for a
-- workflow whose keys come from a function; nothing was written).
local function start_run(base, r)
  if r.ifAbsent and redis.call('EXISTS', k_run(base, r.runId)) == 1 then return r.runId, 'exists' end
  local extra, debounce = r.extra or {}, r.debounce
  if not r.localFlow then
    local dynamic
    extra, debounce, dynamic = registry_flow(base, r.workflow)
    if dynamic then return nil, 'dynamic' end
    for _, v in ipairs(r.extra or {}) do extra[#extra + 1] = v end
  end
  local availableAt = r.availableAt
  if debounce then
    local pendingId, due = debounce_start(base, debounce, r.runId, r.input, r.now, availableAt)
    if pendingId then return pendingId, 'merged' end
    availableAt = due
  end
  create_run(base, r.runId, r.workflow, r.queue, r.maxAttempts, r.input, r.now, availableAt, extra, false)
  return r.runId, 'created'
end
