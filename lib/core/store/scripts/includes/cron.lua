-- cron.lua: the entries of the cron definitions hash and the next-tick zset, written the same way
-- by registry sync (workflow definitions' triggers) and by schedule/unschedule (runtime schedules).
--!include keys.lua

-- Runtime schedules' ids start with '@', which no trigger id of a workflow definition may (the
-- twin of RUNTIME_CRON_MARK in definition/cron.ts): registry sync never removes one.
local function is_runtime_cron(id)
  return string.sub(id, 1, 1) == '@'
end

-- Stores cron `id` with its definition JSON `def`. A new or changed definition gets `next` as its
-- next tick; an unchanged one keeps the next tick it has, and a paused one has none (resuming sets
-- it). Returns that next tick (nil while paused) and whether the definition changed.
local function put_cron(base, defsKey, nextKey, id, def, next)
  local changed = redis.call('HGET', defsKey, id) ~= def
  if changed then redis.call('HSET', defsKey, id, def) end
  if redis.call('HEXISTS', k_cron_paused(base), id) == 1 then
    redis.call('ZREM', nextKey, id)
    return nil, changed
  end
  local current = redis.call('ZSCORE', nextKey, id)
  if current and not changed then return current, false end
  redis.call('ZADD', nextKey, next, id)
  return next, changed
end

-- Removes cron `id`, with its pause, its last run id and its held tick; true when it existed.
local function remove_cron(base, defsKey, nextKey, id)
  local removed = redis.call('HDEL', defsKey, id) + redis.call('ZREM', nextKey, id)
  redis.call('HDEL', k_cron_paused(base), id)
  redis.call('HDEL', k_cron_last(base), id)
  redis.call('HDEL', k_cron_buffered(base), id)
  return removed > 0
end
