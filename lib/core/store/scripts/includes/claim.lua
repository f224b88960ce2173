-- claim.lua: claiming the next admitted run of a queue.
--!include keys.lua
--!include index.lua
--!include capacity.lua
--!include admit.lua
--!include ready.lua
--!include run-events.lua

-- Pops run ids from a queue's ready list until one is admitted (or is a compensating run no worker
-- holds), starts it under the given lease token and returns { runId, flat hash (run fields and step records) }, or nil when the list is
-- empty. Ids of runs canceled while queued (or already deleted) are dropped here instead of being
-- searched for in the list when they are canceled.
-- `now` is workflow time (admission, the first start's startedAt); `leaseUntil` is real time, as the reaper's.
-- `skip` (nil for most workers): a set of workflows whose queued runs this worker leaves, because
-- it has them at another version than the list's (a version-1 list shared with a workflow at v2).
-- Such runs go back to the head of the list in their order (put_back); the reply is then
-- { '', workflow } when no run was claimed.
local function put_back(readyKey, left, rotate)
  if #left == 0 then return end
  if rotate then
    -- The claim popped its 1,000 ids: the left ones go behind the rest, so the next claim reaches them.
    redis.call('RPUSH', readyKey, unpack(left))
  else
    for i = #left, 1, -1 do redis.call('LPUSH', readyKey, left[i]) end
  end
end

-- The fields of the run hash a worker reads when it starts a run's first attempt (run-executor.ts),
-- read by the claim's HMGET below: such a run has no journal yet, so the claim replies with these
-- instead of reading the whole hash again. A field the worker starts to read goes into both.
local CLAIM_FIELDS = { 'status', 'createdAt', 'workflow', 'mutex', 'throttle', 'rateLimit', 'queue', 'resume', 'waited',
  'timeout', 'deadline', 'lease', 'attempt', 'input', 'maxAttempts', 'traceparent', 'tracestate', 'startedAt', 'scheduledAt', 'conc', 'batch' }

-- Fields a claim writes (the claim's reply takes their new values from `written`).
local CLAIM_WRITES = { status = true, lease = true, startedAt = true, attempt = true, resume = true, slot = true, deadline = true }

-- The reply of a first claim: the hash as it is now, from `run` (CLAIM_FIELDS) and `written`
-- (field, value pairs the claim wrote).
local function first_claim_reply(run, written)
  local reply = { unpack(written) }
  for i = 1, #CLAIM_FIELDS do
    local name = CLAIM_FIELDS[i]
    if run[i] and not CLAIM_WRITES[name] then
      reply[#reply + 1] = name
      reply[#reply + 1] = run[i]
    end
  end
  if run[11] then reply[#reply + 1] = 'deadline'; reply[#reply + 1] = run[11] end
  return reply
end

-- True when `queue` (of a ready list `q:<queue>:ready`, or a version's `q:<queue>@v<N>:ready`)
-- is paused: one HEXISTS, the price of pausing, paid by every claim.
local function queue_paused(base, queue)
  return redis.call('HEXISTS', k_queues_paused(base), (string.gsub(queue, '@v%d+$', ''))) == 1
end

-- The next entry of a queue: the head of its priority zset when that goes first (its score is
-- below the ready time of the list's head), else the list's head. The priority mark met at the
-- head is dropped: it only wakes workers blocked on an empty list (the next priority run puts it
-- back). One ZRANGE when the queue has no priority run.
local function next_entry(base, queue, readyKey, prioKey, now)
  local top = redis.call('ZRANGE', prioKey, 0, 0, 'WITHSCORES')
  if top[1] then
    local head = redis.call('LINDEX', readyKey, 0)
    if head == PRIORITY_MARK then
      redis.call('LPOP', readyKey)
      redis.call('HDEL', k_groups(base), priority_mark_field(queue))
      head = redis.call('LINDEX', readyKey, 0)
    end
    local first = not head
    if not first then
      local readyAt = now
      if string.byte(head, 1) ~= 1 then readyAt = tonumber(redis.call('HGET', k_run(base, head), 'availableAt') or now) or now end
      first = tonumber(top[2]) < readyAt * PRIORITY_SCALE
    end
    if first then
      redis.call('ZREM', prioKey, top[1])
      return top[1]
    end
  end
  return redis.call('LPOP', readyKey)
end

-- A mark popped from a ready list (ready.lua): the priority mark is dropped. A key's place gives
-- the key's oldest run and goes back to the end of the list (keys take turns); a place that finds
-- its key's list empty is dropped then (the key's next run makes a new one). At its limit, the key
-- leaves the list until a run of it stops. Returns a run id (and true: its key was checked) or nil.
local function take_place(base, readyKey, queue, entry)
  local groupsKey = k_groups(base)
  if entry == PRIORITY_MARK then
    redis.call('HDEL', groupsKey, priority_mark_field(queue))
    return nil
  end
  local conc = string.sub(entry, 3)
  local limit, group = parse_conc(conc)
  if not group then return nil end
  if redis.call('ZCARD', k_group_active(base, group)) >= limit then
    park_group(base, group, queue)
    return nil
  end
  local runId = redis.call('LPOP', k_group_runs(base, group))
  if not runId then
    redis.call('HDEL', groupsKey, group)
    return nil
  end
  redis.call('RPUSH', readyKey, entry)
  return runId, true
end

-- Claims the next run of a ready list; { '', '', 'paused' } when its queue is paused.
local function claim_next(base, readyKey, leasesKey, token, nowText, leaseUntil, skip)
  local queue = string.sub(readyKey, #base + 3, -7)
  if queue_paused(base, queue) then return { '', '', 'paused' } end
  local now = tonumber(nowText)
  local prioKey = k_priority(base, queue)
  local left, leftWorkflow = {}, nil
  for _ = 1, 1000 do
    local runId = next_entry(base, queue, readyKey, prioKey, now)
    if not runId then
      put_back(readyKey, left, false)
      return leftWorkflow and { '', leftWorkflow } or nil
    end
    local keyChecked = false
    if string.byte(runId, 1) == 1 then runId, keyChecked = take_place(base, readyKey, queue, runId) end
    if runId then
      local runKey = k_run(base, runId)
      local run = redis.call('HMGET', runKey, unpack(CLAIM_FIELDS))
      local admitted, slot = false, false
      if run[1] == 'compensating' then
        -- A run whose compensations were interrupted (reaped) or that was canceled with compensate:
        -- a worker takes it to run them, with no admission (it holds no slot or mutex) and the same
        -- attempt. An id popped while a worker holds it already is dropped.
        if not run[12] then
          redis.call('HSET', runKey, 'lease', token)
          redis.call('ZADD', k_comp_leases(base), leaseUntil, runId)
          put_back(readyKey, left, false)
          return { runId, redis.call('HGETALL', runKey) }
        end
      elseif run[1] == 'queued' and skip and skip[run[3]] then
        left[#left + 1] = runId
        leftWorkflow = leftWorkflow or run[3]
      elseif run[1] == 'queued' then
        admitted, slot = admit(base, runId, runKey, run, now, keyChecked)
      elseif run[1] then
        -- Canceled while queued: it may have been the run woken for a freed slot or mutex.
        offer_capacity(base, run[3], run[4])
      end
      if admitted then
        -- A run resuming after a wait or a crash goes on with the same attempt.
        local attempt = tonumber(run[13]) or 0
        local first = attempt == 0 and not run[8]
        if run[8] then
          redis.call('HDEL', runKey, 'resume')
        else
          attempt = attempt + 1
        end
        local attemptText = tostring(attempt)
        local written = { 'status', 'running', 'lease', token, 'attempt', attemptText }
        -- `startedAt` is the run's first start: a retry, a resume after a wait or a crash keeps it.
        if not run[18] then written[#written + 1] = 'startedAt'; written[#written + 1] = nowText end
        if slot then written[#written + 1] = 'slot'; written[#written + 1] = slot end
        -- A run timeout counts from the first start: only the first claim sets the deadline.
        if run[10] and not run[11] then written[#written + 1] = 'deadline'; written[#written + 1] = tostring(now + tonumber(run[10])) end
        redis.call('HSET', runKey, unpack(written))
        move_index(base, runId, run[3], 'queued', 'running', run[2])
        redis.call('ZADD', leasesKey, leaseUntil, runId)
        emit_event(base, 'run.started', runId, run[3], nowText, { 'attempt', attemptText })
        put_back(readyKey, left, false)
        -- A first attempt has no journal: what the worker reads was read above.
        if first then return { runId, first_claim_reply(run, written) } end
        return { runId, redis.call('HGETALL', runKey) }
      end
    end
  end
  put_back(readyKey, left, true)
  return leftWorkflow and { '', leftWorkflow } or nil
end
