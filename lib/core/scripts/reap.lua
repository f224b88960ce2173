-- reap: returns runs whose lease expired (their worker died or stalled) to the front of their
-- queue, releasing their mutex and concurrency slot. The interrupted attempt is not counted;
-- completed steps stay and are not run again.
-- KEYS[1] leases zset
-- ARGV[1] base "{prefix}:"    ARGV[2] now (ms)    ARGV[3] batch size
-- Returns the ids of the recovered runs.
--!include common.lua

local base = ARGV[1]
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local recovered = {}
for _, runId in ipairs(expired) do
  redis.call('ZREM', KEYS[1], runId)
  local runKey = k_run(base, runId)
  local run = redis.call('HMGET', runKey, 'status', 'queue', 'createdAt', 'workflow', 'mutex', 'slot')
  if run[1] == 'running' then
    redis.call('HDEL', runKey, 'lease', 'slot')
    redis.call('HSET', runKey, 'status', 'queued', 'resume', '1')
    move_index(base, runId, 'running', 'queued', run[3])
    release_slots(base, runId, run[4], run[5], run[6])
    redis.call('LPUSH', k_ready(base, run[2]), runId)
    recovered[#recovered + 1] = runId
  end
end
return recovered
