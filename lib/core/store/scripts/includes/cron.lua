-- cron.lua: the entries of the cron definitions hash and the next-tick zset, written the same way
-- by registry sync (workflow definitions' triggers) and by schedule/unschedule (runtime schedules).
--!include keys.lua

-- Runtime schedules' ids start with '@', which no trigger id of a workflow definition may (the
-- twin of RUNTIME_CRON_MARK in definition/cron.ts): registry sync never removes one.
local function is_runtime_cron(id)
  return string.sub(id, 1, 1) == '@'
end

-- True when cron `id` (definition JSON `def`) has a `limit` its ticks have reached: it has ended.
local function cron_limit_reached(base, id, def)
  local ok, decoded = pcall(cjson.decode, def)
  local limit = ok and type(decoded) == 'table' and tonumber(decoded.limit)
  return limit and (tonumber(redis.call('HGET', k_cron_count(base), id)) or 0) >= limit or false
end

-- Stores cron `id` with its definition JSON `def`. A new or changed definition gets `next` as its
-- next tick; an unchanged one keeps the next tick it has. A paused one has none (resuming sets
-- it), nor one that has ended: `next` is '' (past its `endAt`) or its `limit` is reached. Returns
-- that next tick (nil when none) and whether the definition changed.
local function put_cron(base, defsKey, nextKey, id, def, next)
  local changed = redis.call('HGET', defsKey, id) ~= def
  if changed then redis.call('HSET', defsKey, id, def) end
  local current = redis.call('ZSCORE', nextKey, id)
  if current and not changed then return current, false end
  if next == '' or redis.call('HEXISTS', k_cron_paused(base), id) == 1 or cron_limit_reached(base, id, def) then
    redis.call('ZREM', nextKey, id)
    return nil, changed
  end
  redis.call('ZADD', nextKey, next, id)
  return next, changed
end

-- Removes cron `id`, with its pause, its last run id, its held tick and its count; true when it existed.
local function remove_cron(base, defsKey, nextKey, id)
  local removed = redis.call('HDEL', defsKey, id) + redis.call('ZREM', nextKey, id)
  redis.call('HDEL', k_cron_paused(base), id)
  redis.call('HDEL', k_cron_last(base), id)
  redis.call('HDEL', k_cron_buffered(base), id)
  redis.call('HDEL', k_cron_count(base), id)
  return removed > 0
end
