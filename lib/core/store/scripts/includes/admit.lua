-- admit.lua: admission of a queued run: mutex, concurrency, throttle, rate limit.
--!include keys.lua
--!include index.lua
--!include capacity.lua
--!include end-run.lua
--!include ready.lua

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

-- Admission of a queued run, in order: concurrency key, mutex, workflow concurrency, throttle,
-- rate limit. Returns true and the run's `slot` field when the run may start (its mutex and slots
-- are then taken): nil, '1' (a workflow concurrency slot), 'g<conc>' (its key's) or '1g<conc>'
-- (both). Otherwise the run is parked (key: at the front of the key's list; mutex, concurrency),
-- rescheduled (throttle, attempt unchanged) or failed (rate limit). `keyChecked`: the run was taken
-- from its key's place, which found the key under its limit in this script.
-- run = { status, createdAt, workflow, mutex, throttle, rateLimit, queue, resume, waited, ... conc = run[20] }
local function admit(base, runId, runKey, run, now, keyChecked)
  local workflow, mutex, throttle, rateLimit = run[3], run[4], run[5], run[6]
  -- A run without a workflow is corrupt: let the worker claim it and fail it with a clear error.
  if not workflow then return true end
  local groupActive
  if run[20] then
    local groupLimit, group = parse_conc(run[20])
    if group then
      groupActive = k_group_active(base, group)
      if not keyChecked and redis.call('ZCARD', groupActive) >= groupLimit then
        -- It keeps its turn: first of its key's list; the key's place comes back when one stops.
        redis.call('LPUSH', k_group_runs(base, group), runId)
        -- A key with its place in the list is parked when that place comes up.
        if not redis.call('HGET', k_groups(base), group) then park_group(base, group, run[7]) end
        return false
      end
    end
  end
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
    throttleKey, throttlePeriod = k_throttle(base, key), p
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
    rateKey, ratePeriod = k_ratelimit(base, key), p
    if window_full(rateKey, now, l, p) then
      local message = 'Run "' .. runId .. '" of workflow "' .. workflow .. '" exceeded its rate limit of ' .. l ..
        ' runs per ' .. p .. ' ms for key "' .. key .. '". Start it again later, or raise rateLimit.limit.'
      local errorJson = cjson.encode({ name = 'RateLimitExceededError', message = message })
      end_run(base, runId, { from = 'queued', popped = true, workflow = workflow, mutex = mutex, waited = run[9] }, 'failed', now, errorJson)
      return false
    end
  end
  if mutexKey then redis.call('SET', mutexKey, runId) end
  local slot = nil
  if limit > 0 then
    redis.call('ZADD', k_active(base, workflow), now, runId)
    slot = '1'
  end
  if groupActive then
    redis.call('ZADD', groupActive, now, runId)
    slot = (slot or '') .. 'g' .. run[20]
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
