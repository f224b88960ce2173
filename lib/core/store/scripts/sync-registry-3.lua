-- sync-registry: records which workflows exist (queue, limits, event subscriptions, crons) under
-- an owner, and removes what this owner registered before but no longer defines. Other owners'
-- workflows are kept, and so are runtime schedules (client.schedule), which no workflow lists. A
-- cron whose definition is unchanged keeps its next time.
-- KEYS[1] workflows set       KEYS[2] cron definitions hash   KEYS[3] cron next-time zset
-- ARGV: base owner now prune ...entries
-- ARGV[1] base "{prefix}:"    ARGV[2] owner       ARGV[3] now (ms)
-- ARGV[4] '1' to remove this owner's workflows that are not listed, '0' to keep them
-- ARGV[5..] one JSON per workflow: { name, queue, version, maxAttempts, maxConcurrency, events: [name],
--           crons: [{ id, def (JSON text), next }], flow: { mutex?, throttle?, rateLimit?, debounce?, timeout?, dynamic } }
--           (flow: the static flow-control keys runs started without the definition get;
--           queue: where runs of its version wait, "<queue>@v<N>" for N > 1). The entry describes
--           the latest version registered: a definition older than the stored `version` changes
--           nothing but its name in the workflows set.
-- Returns the names of the pruned workflows.
--!include writable.lua
--!include keys.lua
--!include cron.lua

local base, owner, now = ARGV[1], ARGV[2], ARGV[3]
-- Decode every definition before the first write: a malformed one fails the script with nothing changed.
local workflows = {}
for i = 5, #ARGV do workflows[#workflows + 1] = cjson.decode(ARGV[i]) end

assert_writable(base)

local function set_events(name, old, new)
  local keep = {}
  for _, event in ipairs(new) do
    keep[event] = true
    redis.call('SADD', k_event_subs(base, event), name)
  end
  for event in string.gmatch(old or '', '[^\n]+') do
    if not keep[event] then redis.call('SREM', k_event_subs(base, event), name) end
  end
end

local function remove_crons(list, keep)
  for id in string.gmatch(list or '', '[^\n]+') do
    if not keep[id] and not is_runtime_cron(id) then remove_cron(base, KEYS[2], KEYS[3], id) end
  end
end

local defined = {}
for _, wf in ipairs(workflows) do
  local metaKey = k_meta(base, wf.name)
  defined[wf.name] = true
  redis.call('SADD', KEYS[1], wf.name)
  local version = tonumber(wf.version or 1)
  local latest = tonumber(redis.call('HGET', metaKey, 'version') or '1')
  if version >= latest then
    local old = redis.call('HMGET', metaKey, 'events', 'crons')
    set_events(wf.name, old[1], wf.events)
    local cronIds, keepCrons = {}, {}
    for _, cron in ipairs(wf.crons) do
      cronIds[#cronIds + 1] = cron.id
      keepCrons[cron.id] = true
      put_cron(base, KEYS[2], KEYS[3], cron.id, cron.def, cron.next)
  end
  remove_crons(old[2], keepCrons)
  redis.call('HSET', metaKey, 'queue', wf.queue, 'maxAttempts', wf.maxAttempts, 'maxConcurrency', wf.maxConcurrency,
    'owner', owner, 'updatedAt', now, 'events', table.concat(wf.events, '\n'), 'crons', table.concat(cronIds, '\n'))
  local flow = wf.flow or {}
  for _, kind in ipairs({ 'mutex', 'throttle', 'rateLimit', 'debounce', 'timeout', 'priority', 'conc', 'batch' }) do
    local value = flow[kind]
    if type(value) == 'string' then redis.call('HSET', metaKey, 'f' .. kind, value) else redis.call('HDEL', metaKey, 'f' .. kind) end
  end
  if flow.dynamic then redis.call('HSET', metaKey, 'fdynamic', '1') else redis.call('HDEL', metaKey, 'fdynamic') end
  -- Version 1 keeps the entry as it was before versions existed: no field.
  if version > 1 then redis.call('HSET', metaKey, 'version', version) else redis.call('HDEL', metaKey, 'version') end
  end
end

local pruned = {}
for _, name in ipairs(ARGV[4] == '1' and redis.call('SMEMBERS', KEYS[1]) or {}) do
  if not defined[name] then
    local metaKey = k_meta(base, name)
    local meta = redis.call('HMGET', metaKey, 'owner', 'crons', 'events')
    if meta[1] == owner then
      remove_crons(meta[2], {})
      set_events(name, meta[3], {})
      redis.call('SREM', KEYS[1], name)
      redis.call('DEL', metaKey)
      pruned[#pruned + 1] = name
    end
  end
end
return pruned
