-- sync-registry: records which workflows exist (name, queue, maxAttempts, owner) and removes the
-- ones this owner registered before but no longer defines. Other owners' workflows are kept.
-- KEYS[1] workflows set
-- ARGV[1] base "{prefix}:"    ARGV[2] owner       ARGV[3] now (ms)
-- ARGV[4..] triples of workflow name, queue, maxAttempts
-- Returns the names of the pruned workflows.

local base, owner = ARGV[1], ARGV[2]
local keep = {}
for i = 4, #ARGV, 3 do
  local name = ARGV[i]
  keep[name] = true
  redis.call('SADD', KEYS[1], name)
  redis.call('HSET', base .. 'workflow:' .. name, 'queue', ARGV[i + 1], 'maxAttempts', ARGV[i + 2],
    'owner', owner, 'updatedAt', ARGV[3])
end
local pruned = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  if not keep[name] then
    local metaKey = base .. 'workflow:' .. name
    if redis.call('HGET', metaKey, 'owner') == owner then
      redis.call('SREM', KEYS[1], name)
      redis.call('DEL', metaKey)
      pruned[#pruned + 1] = name
    end
  end
end
return pruned
