-- ready.lua: what a queue's ready list holds besides run ids, and where a new or due run goes.
--   Priority runs (a `priority` field, not 0) wait in the queue's priority zset, scored by their
--   ready time shifted by PRIORITY_LEVEL_MS per level; a claim compares its head with the list's
--   head (claim.lua). The list then holds one mark, '\1p', so a worker blocked on the list wakes.
--   Runs of a keyed concurrency limit (a `conc` field "<limit>|<workflow>|<key>") wait in their
--   key's list; the ready list holds one place for the key, '\1g<conc>'. A claim reaching the place
--   takes the key's oldest run and puts the place back at the end of the list: keys take turns.
-- The `groups` hash says where each key's place is: 'r|<queue>' in that queue's ready list,
-- 'p|<queue>' out of it while the key is at its limit (the next release puts it back). A key whose
-- list is not empty always has a field; a place taken off the list that finds the list empty drops
-- it. Field '\1p<queue>' is there while the queue's mark is in its list.
-- While a key waits out of the list ('p|'), its count (`grp-active:`) also holds the member
-- PARKED, so the release that frees a slot learns it from its ZREM, with no look at `groups`.
--!include keys.lua

-- A run of priority p goes before runs without priority that became ready up to p minutes after it
-- (and after those that were ready more than p minutes before it): no run waits forever.
local PRIORITY_LEVEL_MS = 60000
-- Scores are ready-time ms × 1024 plus an order within the ms, so runs of one priority stay FIFO.
local PRIORITY_SCALE = 1024

local PARKED = '\1p'
-- The priority mark in a ready list, and the `groups` field set while it is in `queue`'s list.
local PRIORITY_MARK = '\1p'
local function priority_mark_field(queue) return PRIORITY_MARK .. queue end

-- "<limit>|<workflow>|<key>" → limit, group ("<workflow>|<key>").
local function parse_conc(conc)
  local limit, group = string.match(conc, '^(%d+)|(.*)$')
  return tonumber(limit), group
end

-- Puts the place of a key (conc) at the end of a queue's ready list.
local function place_group(base, queue, conc, group)
  redis.call('HSET', k_groups(base), group, 'r|' .. queue)
  redis.call('RPUSH', k_ready(base, queue), '\1g' .. conc)
end

-- Puts a new or due run where a claim finds it: the end of its key's list, the priority zset, or
-- the end of the ready list. `priority` and `conc` are the run's fields (nil when absent).
local function push_ready(base, queue, runId, now, priority, conc)
  if conc then
    local _, group = parse_conc(conc)
    -- A key with runs waiting has a place (in the list, or out of it at its limit: it gets it back
    -- when a run of it stops); only a key whose list was empty may need one.
    if redis.call('RPUSH', k_group_runs(base, group), runId) == 1 and not redis.call('HGET', k_groups(base), group) then
      place_group(base, queue, conc, group)
    end
    return
  end
  local level = tonumber(priority or '0') or 0
  if level == 0 then
    redis.call('RPUSH', k_ready(base, queue), runId)
    return
  end
  local prioKey = k_priority(base, queue)
  local field = level .. '|' .. queue
  local score = (now - level * PRIORITY_LEVEL_MS) * PRIORITY_SCALE
  local last = tonumber(redis.call('HGET', k_priority_last(base), field) or '0')
  if score <= last then score = last + 1 end
  redis.call('HSET', k_priority_last(base), field, score)
  redis.call('ZADD', prioKey, score, runId)
  if redis.call('HSETNX', k_groups(base), priority_mark_field(queue), '1') == 1 then redis.call('RPUSH', k_ready(base, queue), PRIORITY_MARK) end
end

-- Takes a key out of its queue's ready list while it is at its limit (its place was popped, or one
-- of its runs came back to the list and found it so): its next release puts the place back.
local function park_group(base, group, queue)
  redis.call('HSET', k_groups(base), group, 'p|' .. queue)
  redis.call('ZADD', k_group_active(base, group), 0, PARKED)
end

-- A run of a key stopped running: gives back its slot, and when the key waited out of the list
-- (its count held PARKED), puts the key's place back at the end of its queue's ready list.
local function release_group(base, runId, conc)
  local _, group = parse_conc(conc)
  if not group or redis.call('ZREM', k_group_active(base, group), runId, PARKED) < 2 then return end
  local state = redis.call('HGET', k_groups(base), group)
  if state and string.sub(state, 1, 2) == 'p|' then
    if redis.call('LLEN', k_group_runs(base, group)) > 0 then
      place_group(base, string.sub(state, 3), conc, group)
    else
      redis.call('HDEL', k_groups(base), group)
    end
  end
end
