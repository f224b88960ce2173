-- Shared fragment, included at the top of scripts that need it (see script-loader.ts).
-- Key shapes match keys.ts; `base` is "{prefix}:", so every key stays in the prefix's hash tag.

local function k_run(base, id) return base .. 'run:' .. id end
local function k_ready(base, queue) return base .. 'q:' .. queue .. ':ready' end
local function k_scheduled(base, queue) return base .. 'q:' .. queue .. ':scheduled' end
local function k_status(base, status) return base .. 'status:' .. status end

-- Moves a run between status indexes. Score: creation time for live statuses; finish time for
-- terminal ones, so they list most recently finished first and retention walks them oldest first.
-- Running runs have no status index: the leases zset lists them.
local function move_index(base, runId, from, to, score)
  if from and from ~= 'running' then redis.call('ZREM', k_status(base, from), runId) end
  if to ~= 'running' then redis.call('ZADD', k_status(base, to), score, runId) end
end

-- Pops run ids from a queue's ready list until one is still queued, starts it under the given lease
-- token and returns { runId, flat hash (run fields and step records) }, or nil when the list is
-- empty. Ids of runs canceled while queued (or already deleted) are dropped here instead of being
-- searched for in the list when they are canceled.
local function claim_next(base, readyKey, leasesKey, token, now, leaseMs)
  for _ = 1, 1000 do
    local runId = redis.call('LPOP', readyKey)
    if not runId then return nil end
    local runKey = k_run(base, runId)
    local run = redis.call('HMGET', runKey, 'status', 'createdAt')
    if run[1] == 'queued' then
      redis.call('HINCRBY', runKey, 'attempt', 1)
      redis.call('HSET', runKey, 'status', 'running', 'lease', token, 'startedAt', now)
      move_index(base, runId, 'queued', 'running', run[2])
      redis.call('ZADD', leasesKey, tonumber(now) + tonumber(leaseMs), runId)
      return { runId, redis.call('HGETALL', runKey) }
    end
  end
  return nil
end
