-- promote: moves due scheduled runs of a queue (delayed runs, retries) to its ready list (or, with
-- a priority or a concurrency key, where ready.lua puts them).
-- KEYS[1] queue scheduled zset  KEYS[2] queue ready list
-- ARGV: base now batch
-- ARGV[1] base "{prefix}:"    ARGV[2] now (ms)    ARGV[3] batch size
-- Returns { moved count, next due time in ms or -1 }
--!include writable.lua
--!include keys.lua
--!include index.lua
--!include ready.lua

local base = ARGV[1]
assert_writable(base)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local moved = 0
for _, runId in ipairs(due) do
  redis.call('ZREM', KEYS[1], runId)
  local runKey = k_run(base, runId)
  local run = redis.call('HMGET', runKey, 'status', 'createdAt', 'workflow', 'priority', 'conc', 'queue')
  if run[1] == 'scheduled' then
    redis.call('HSET', runKey, 'status', 'queued')
    move_index(base, runId, run[3], 'scheduled', 'queued', run[2])
    if (run[4] or run[5]) and run[6] then
      push_ready(base, run[6], runId, tonumber(ARGV[2]), run[4], run[5])
    else
      redis.call('RPUSH', KEYS[2], runId)
    end
    moved = moved + 1
  end
end
local nextDue = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if nextDue[2] then return { moved, tonumber(nextDue[2]) } end
return { moved, -1 }
