-- Shared fragment, included at the top of scripts that need it (see script-loader.ts).
-- Key shapes match keys.ts; `base` is "{prefix}:", so every key stays in the prefix's hash tag.

local function k_run(base, id) return base .. 'run:' .. id end
local function k_ready(base, queue) return base .. 'q:' .. queue .. ':ready' end
local function k_scheduled(base, queue) return base .. 'q:' .. queue .. ':scheduled' end
local function k_status(base, status) return base .. 'status:' .. status end
local function k_meta(base, workflow) return base .. 'workflow:' .. workflow end
local function k_active(base, workflow) return base .. 'wf:' .. workflow .. ':active' end
local function k_parked(base, workflow) return base .. 'wf:' .. workflow .. ':parked' end
local function k_mutex(base, key) return base .. 'mutex:' .. key end
-- User-chosen parts (run ids, mutex keys) always end a key, and each kind of key has its own
-- fixed first segment: a mutex named "m:parked" can never be the parked list of mutex "m".
local function k_mutex_parked(base, key) return base .. 'mutex-parked:' .. key end
local function k_children(base, runId) return base .. 'children:' .. runId end
local function k_waiters(base, runId) return base .. 'waiters:' .. runId end
local function k_workflow_runs(base, workflow) return base .. 'wf:' .. workflow .. ':runs' end
-- Runs of a workflow in a status. The status is one of six words without ':', and the workflow
-- name ends the key, so 'wfstatus:<status>:<workflow>' splits one way only: a workflow named
-- 'a:b' in status 'failed' is 'wfstatus:failed:a:b', which no other (status, workflow) pair builds.
local function k_workflow_status(base, status, workflow) return base .. 'wfstatus:' .. status .. ':' .. workflow end
local function k_idempotency(base, workflow, key) return base .. 'idem:' .. workflow .. '|' .. key end
local function k_event_subs(base, event) return base .. 'event:' .. event .. ':subs' end
local function k_event_data(base, eventId) return base .. 'evdata:' .. eventId end

local TERMINAL = { succeeded = true, failed = true, canceled = true }
local STATUSES = { 'scheduled', 'queued', 'running', 'succeeded', 'failed', 'canceled' }

-- Called first by every script that may grow memory. Redis refuses a script's first
-- memory-growing write when it is over maxmemory (OOM), a replica (READONLY) or cannot persist
-- (MISCONF), but lets every later write of that script through. A script whose first write is
-- an LPOP or a ZREM would therefore get half-way on a full Redis. This no-op write (SET XX of a
-- key that never exists) makes the refusal happen here, before anything has changed.
local function assert_writable(base)
  redis.call('SET', base .. 'write-check', '1', 'XX')
end

-- Moves a run between status indexes, and between the (workflow, status) indexes of its
-- workflow. Score: creation time for live statuses; finish time for terminal ones, so they list
-- most recently finished first and retention walks them oldest first. Running runs have no status
-- index (the leases zset lists them), but do have a (workflow, status) index, scored by creation
-- time like the other live statuses. `workflow` is nil only for a corrupt run without one.
local function move_index(base, runId, workflow, from, to, score)
  if from and from ~= 'running' then redis.call('ZREM', k_status(base, from), runId) end
  if to ~= 'running' then redis.call('ZADD', k_status(base, to), score, runId) end
  if workflow then
    if from then redis.call('ZREM', k_workflow_status(base, from, workflow), runId) end
    redis.call('ZADD', k_workflow_status(base, to, workflow), score, runId)
  end
end

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
  local status = 'queued'
  if availableAt > now then status = 'scheduled' end
  redis.call('HSET', runKey, 'workflow', workflow, 'queue', queue, 'status', status, 'input', input,
    'attempt', 0, 'maxAttempts', maxAttempts, 'createdAt', now, 'availableAt', availableAt)
  if extra and #extra > 0 then redis.call('HSET', runKey, unpack(extra)) end
  redis.call('ZADD', k_workflow_runs(base, workflow), now, runId)
  move_index(base, runId, workflow, nil, status, now)
  if status == 'scheduled' then
    redis.call('ZADD', k_scheduled(base, queue), availableAt, runId)
  else
    redis.call('RPUSH', k_ready(base, queue), runId)
  end
  return true
end

local function k_debounce(base, workflow, key) return base .. 'debounce:' .. workflow .. '|' .. key end

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
-- fields (mutex, throttle, rateLimit pairs), a debounce spec or nil, and whether the definition
-- computes a key with a function (which only a process holding the definition can run).
local function registry_flow(base, workflow)
  local f = redis.call('HMGET', k_meta(base, workflow), 'fmutex', 'fthrottle', 'frateLimit', 'fdebounce', 'fdynamic')
  local extra = {}
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

-- Moves a scheduled run to the front of its queue (a child finished, a parked slot freed).
local function wake(base, runId, run)
  -- run = { status, queue, createdAt, workflow }
  redis.call('ZREM', k_scheduled(base, run[2]), runId)
  redis.call('HSET', k_run(base, runId), 'status', 'queued')
  move_index(base, runId, run[4], run[1], 'queued', run[3])
  redis.call('LPUSH', k_ready(base, run[2]), runId)
end

-- Puts the first still-queued run of a parked list back at the front of its queue.
local function unpark_one(base, parkedKey)
  for _ = 1, 1000 do
    local runId = redis.call('LPOP', parkedKey)
    if not runId then return end
    local run = redis.call('HMGET', k_run(base, runId), 'status', 'queue')
    if run[1] == 'queued' then
      redis.call('LPUSH', k_ready(base, run[2]), runId)
      return
    end
  end
end

-- Releases what a running run holds besides its lease: its mutex and its workflow concurrency
-- slot, each handed to the next parked run. Called whenever a run stops running.
-- `slot` is the run's `slot` field: set while it holds a concurrency slot.
local function release_slots(base, runId, workflow, mutex, slot)
  if mutex and mutex ~= '' then
    local mutexKey = k_mutex(base, mutex)
    if redis.call('GET', mutexKey) == runId then
      redis.call('DEL', mutexKey)
      unpark_one(base, k_mutex_parked(base, mutex))
    end
  end
  if slot and workflow and redis.call('ZREM', k_active(base, workflow), runId) == 1 then
    unpark_one(base, k_parked(base, workflow))
  end
end

-- Step record of a resolved child wait: [1, seq, attempt, finishedAt, 0, output] or
-- [0, seq, attempt, finishedAt, 0, error]; `payload` is JSON ('' = no output). Parsed with a
-- pattern, not cjson, so a damaged record cannot raise an error after this script has written:
-- it returns nil and the record is left for the run's replay to report as corrupt.
local function resolved_record(waiting, ok, payload, now)
  local seq, attempt = string.match(waiting, '^%[3,(%d+),(%d+),')
  if not seq then return nil end
  local head = '[' .. (ok and 1 or 0) .. ',' .. seq .. ',' .. attempt .. ',' .. now .. ',0'
  if payload == '' then return head .. ']' end
  return head .. ',' .. payload .. ']'
end

-- A run ended: hand its result to every parent waiting on it (step.runWorkflow), and wake those
-- parents that are suspended. Callers check the run's `waited` field first (set by start-child),
-- so runs nobody waits on pay nothing here.
local function notify_waiters(base, runId, ok, payload, now)
  local waitersKey = k_waiters(base, runId)
  for _, waiter in ipairs(redis.call('SMEMBERS', waitersKey)) do
    local sep = string.find(waiter, '|', 1, true)
    local parentId, field = string.sub(waiter, 1, sep - 1), string.sub(waiter, sep + 1)
    local parentKey = k_run(base, parentId)
    local parent = redis.call('HMGET', parentKey, 'status', 'queue', 'createdAt', 'workflow')
    if parent[1] and not TERMINAL[parent[1]] then
      local waiting = redis.call('HGET', parentKey, field)
      if waiting and string.sub(waiting, 1, 2) == '[3' then
        local record = resolved_record(waiting, ok, payload, now)
        if record then redis.call('HSET', parentKey, field, record) end
        if parent[1] == 'scheduled' then wake(base, parentId, parent) end
      end
    end
  end
  redis.call('DEL', waitersKey)
end

-- A queued run left without taking a slot or mutex (dropped as canceled, rate-limited, throttled):
-- the run woken for that capacity is gone, so wake the next parked run if the capacity is free.
local function offer_capacity(base, workflow, mutex)
  if workflow then
    local limit = tonumber(redis.call('HGET', k_meta(base, workflow), 'maxConcurrency') or '0')
    if limit > 0 and redis.call('ZCARD', k_active(base, workflow)) < limit then unpark_one(base, k_parked(base, workflow)) end
  end
  if mutex then
    local mutexKey = k_mutex(base, mutex)
    if not redis.call('GET', mutexKey) then unpark_one(base, k_mutex_parked(base, mutex)) end
  end
end

-- "limit|periodMs|key" as stored for throttle and rateLimit.
local function parse_limit(spec)
  local limit, period, key = string.match(spec, '^(%d+)|(%d+)|(.*)$')
  return tonumber(limit), tonumber(period), key
end

-- Sliding window of run starts: the time a start is allowed again, or nil when one is allowed now.
local function window_full(windowKey, now, limit, period)
  redis.call('ZREMRANGEBYSCORE', windowKey, '-inf', now - period)
  if redis.call('ZCARD', windowKey) < limit then return nil end
  local oldest = redis.call('ZRANGE', windowKey, 0, 0, 'WITHSCORES')
  return tonumber(oldest[2]) + period
end

-- Admission of a queued run, in order: mutex, workflow concurrency, throttle, rate limit. Returns
-- true (and whether it took a concurrency slot) when the run may start (its mutex and slot are
-- then taken); otherwise the run is parked
-- (mutex, concurrency), rescheduled (throttle, attempt unchanged) or failed (rate limit).
-- run = { status, createdAt, workflow, mutex, throttle, rateLimit, queue, resume, waited }
local function admit(base, runId, runKey, run, now)
  local workflow, mutex, throttle, rateLimit = run[3], run[4], run[5], run[6]
  -- A run without a workflow is corrupt: let the worker claim it and fail it with a clear error.
  if not workflow then return true end
  local mutexKey
  if mutex then
    mutexKey = k_mutex(base, mutex)
    local holder = redis.call('GET', mutexKey)
    if holder and holder ~= runId then
      redis.call('RPUSH', k_mutex_parked(base, mutex), runId)
      return false
    end
  end
  local limit = tonumber(redis.call('HGET', k_meta(base, workflow), 'maxConcurrency') or '0')
  if limit > 0 and redis.call('ZCARD', k_active(base, workflow)) >= limit then
    redis.call('RPUSH', k_parked(base, workflow), runId)
    return false
  end
  local throttleKey, throttlePeriod, rateKey, ratePeriod
  -- A run resuming after a wait or a crash already counted its start in the windows.
  if run[8] then throttle, rateLimit = nil, nil end
  if throttle then
    local l, p, key = parse_limit(throttle)
    throttleKey, throttlePeriod = base .. 'throttle:' .. key, p
    local due = window_full(throttleKey, now, l, p)
    if due then
      redis.call('HSET', runKey, 'status', 'scheduled', 'availableAt', due)
      move_index(base, runId, workflow, 'queued', 'scheduled', run[2])
      redis.call('ZADD', k_scheduled(base, run[7]), due, runId)
      offer_capacity(base, workflow, mutex)
      return false
    end
  end
  if rateLimit then
    local l, p, key = parse_limit(rateLimit)
    rateKey, ratePeriod = base .. 'ratelimit:' .. key, p
    if window_full(rateKey, now, l, p) then
      local message = 'Run "' .. runId .. '" of workflow "' .. workflow .. '" exceeded its rate limit of ' .. l ..
        ' runs per ' .. p .. ' ms for key "' .. key .. '". Start it again later, or raise rateLimit.limit.'
      local errorJson = cjson.encode({ name = 'RateLimitExceededError', message = message })
      redis.call('HSET', runKey, 'status', 'failed', 'finishedAt', now, 'error', errorJson)
      move_index(base, runId, workflow, 'queued', 'failed', now)
      if run[9] then notify_waiters(base, runId, false, errorJson, now) end
      offer_capacity(base, workflow, mutex)
      return false
    end
  end
  if mutexKey then redis.call('SET', mutexKey, runId) end
  local slot = false
  if limit > 0 then
    redis.call('ZADD', k_active(base, workflow), now, runId)
    slot = true
  end
  if throttleKey then
    redis.call('ZADD', throttleKey, now, runId)
    redis.call('PEXPIRE', throttleKey, throttlePeriod)
  end
  if rateKey then
    redis.call('ZADD', rateKey, now, runId)
    redis.call('PEXPIRE', rateKey, ratePeriod)
  end
  return true, slot
end

-- Pops run ids from a queue's ready list until one is admitted, starts it under the given lease
-- token and returns { runId, flat hash (run fields and step records) }, or nil when the list is
-- empty. Ids of runs canceled while queued (or already deleted) are dropped here instead of being
-- searched for in the list when they are canceled.
local function claim_next(base, readyKey, leasesKey, token, now, leaseMs)
  now = tonumber(now)
  for _ = 1, 1000 do
    local runId = redis.call('LPOP', readyKey)
    if not runId then return nil end
    local runKey = k_run(base, runId)
    local run = redis.call('HMGET', runKey, 'status', 'createdAt', 'workflow', 'mutex', 'throttle', 'rateLimit', 'queue',
      'resume', 'waited')
    local admitted, slot = false, false
    if run[1] == 'queued' then
      admitted, slot = admit(base, runId, runKey, run, now)
    elseif run[1] then
      -- Canceled while queued: it may have been the run woken for a freed slot or mutex.
      offer_capacity(base, run[3], run[4])
    end
    if admitted then
      -- A run resuming after a wait or a crash goes on with the same attempt.
      if run[8] then redis.call('HDEL', runKey, 'resume') else redis.call('HINCRBY', runKey, 'attempt', 1) end
      if slot then
        redis.call('HSET', runKey, 'status', 'running', 'lease', token, 'startedAt', now, 'slot', '1')
      else
        redis.call('HSET', runKey, 'status', 'running', 'lease', token, 'startedAt', now)
      end
      move_index(base, runId, run[3], 'queued', 'running', run[2])
      redis.call('ZADD', leasesKey, now + tonumber(leaseMs), runId)
      return { runId, redis.call('HGETALL', runKey) }
    end
  end
  return nil
end

