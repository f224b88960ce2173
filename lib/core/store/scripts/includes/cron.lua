-- cron.lua: the entries of the cron definitions hash and the next-tick zset, written the same way
-- by registry sync (workflow definitions' triggers) and by schedule/unschedule (runtime schedules).

-- Runtime schedules' ids start with '@', which no trigger id of a workflow definition may (the
-- twin of RUNTIME_CRON_MARK in definition/cron.ts): registry sync never removes one.
local function is_runtime_cron(id)
  return string.sub(id, 1, 1) == '@'
end

-- Stores cron `id` with its definition JSON `def`. A new or changed definition gets `next` as its
-- next tick; an unchanged one keeps the next tick it has. Returns that next tick and whether the
-- definition changed.
local function put_cron(defsKey, nextKey, id, def, next)
  local current = redis.call('ZSCORE', nextKey, id)
  if current and redis.call('HGET', defsKey, id) == def then return current, false end
  redis.call('HSET', defsKey, id, def)
  redis.call('ZADD', nextKey, next, id)
  return next, true
end

-- Removes cron `id`; true when it existed.
local function remove_cron(defsKey, nextKey, id)
  local removed = redis.call('HDEL', defsKey, id) + redis.call('ZREM', nextKey, id)
  return removed > 0
end
