-- cancel: makes a queued, scheduled or running run canceled at once. A queued run's id stays in the
-- ready list and is dropped by the next claim; a running run loses its lease and its worker is told
-- on the cancel channel (and, as a safety net, by its next checkpoint or heartbeat).
-- KEYS[1] run hash            KEYS[2] leases zset
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] now (ms)
-- ARGV[4] error JSON          ARGV[5] reason      ARGV[6] cancel channel
-- Returns 'ok' when canceled now, else the unchanged terminal status, or 'missing'
--!include common.lua

local base, runId = ARGV[1], ARGV[2]
local runKey = KEYS[1]
local run = redis.call('HMGET', runKey, 'status', 'queue')
local status = run[1]
if not status then return 'missing' end
if status ~= 'queued' and status ~= 'scheduled' and status ~= 'running' then return status end
if status == 'scheduled' then
  redis.call('ZREM', k_scheduled(base, run[2]), runId)
elseif status == 'running' then
  redis.call('ZREM', KEYS[2], runId)
  redis.call('HDEL', runKey, 'lease')
  redis.call('PUBLISH', ARGV[6], runId)
end
redis.call('HSET', runKey, 'status', 'canceled', 'error', ARGV[4], 'cancelReason', ARGV[5], 'finishedAt', ARGV[3])
move_index(base, runId, status, 'canceled', ARGV[3])
return 'ok'
