-- Shared fragment, included at the top of scripts that need it (see script-loader.ts).
-- Key shapes match keys.ts; `base` is "{prefix}:", so every key stays in the prefix's hash tag.

local function k_run(base, id) return base .. 'run:' .. id end
local function k_ready(base, queue) return base .. 'q:' .. queue .. ':ready' end
local function k_scheduled(base, queue) return base .. 'q:' .. queue .. ':scheduled' end
local function k_status(base, status) return base .. 'status:' .. status end

-- Sets a run's status and moves it between the status indexes (score: creation time, for newest-first).
local function set_status(base, runKey, runId, from, to)
  local createdAt = redis.call('HGET', runKey, 'createdAt') or '0'
  if from then redis.call('ZREM', k_status(base, from), runId) end
  redis.call('ZADD', k_status(base, to), createdAt, runId)
  redis.call('HSET', runKey, 'status', to)
end

-- Pops run ids from a queue's ready list until one is still queued, starts it under a new lease and
-- returns { runId, leaseToken, flat hash (run fields and step records) }, or nil when the list is empty.
-- Ids of runs canceled while queued (or already deleted) are dropped here instead of being searched
-- for in the list when they are canceled.
local function claim_next(base, readyKey, leasesKey, workerId, now, leaseMs)
  for _ = 1, 1000 do
    local runId = redis.call('LPOP', readyKey)
    if not runId then return nil end
    local runKey = k_run(base, runId)
    if redis.call('HGET', runKey, 'status') == 'queued' then
      local claims = redis.call('HINCRBY', runKey, 'claims', 1)
      redis.call('HINCRBY', runKey, 'attempt', 1)
      local token = workerId .. ':' .. claims
      redis.call('HSET', runKey, 'lease', token, 'startedAt', now)
      set_status(base, runKey, runId, 'queued', 'running')
      redis.call('ZADD', leasesKey, tonumber(now) + tonumber(leaseMs), runId)
      return { runId, token, redis.call('HGETALL', runKey) }
    end
  end
  return nil
end
