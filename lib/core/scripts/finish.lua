-- finish: ends an attempt (succeeded, failed, or retry = back to scheduled), writing any step
-- records not yet checkpointed, releasing the lease, and claiming the next queued run of the same
-- queue when the worker has a free slot (so a busy worker needs no separate claim).
-- KEYS[1] run hash            KEYS[2] leases zset
-- KEYS[3] queue ready list    KEYS[4] queue scheduled zset
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] now (ms)
-- ARGV[5] outcome: 'succeeded' | 'failed' | 'retry'
-- ARGV[6] output JSON (succeeded) or error JSON (failed, retry)
-- ARGV[7] retry due time (ms)  ARGV[8] '1' to claim the next run   ARGV[9] worker id
-- ARGV[10] lease (ms)          ARGV[11..] pairs of step field, step record JSON
-- Returns { code } or { code, nextRunId, nextLeaseToken, next flat run hash }
--   code: 'ok' | 'canceled' (run was canceled meanwhile) | 'lost' (lease taken over or run gone)
--!include common.lua

local base, runId, token, now, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local runKey = KEYS[1]
local code = 'ok'
local run = redis.call('HMGET', runKey, 'status', 'lease')
if run[1] ~= 'running' or run[2] ~= token then
  code = 'lost'
  if run[1] == 'canceled' then code = 'canceled' end
else
  for i = 11, #ARGV, 2 do
    redis.call('HSET', runKey, ARGV[i], ARGV[i + 1])
  end
  redis.call('ZREM', KEYS[2], runId)
  redis.call('HDEL', runKey, 'lease')
  if outcome == 'succeeded' then
    redis.call('HSET', runKey, 'output', ARGV[6], 'finishedAt', now)
    set_status(base, runKey, runId, 'running', 'succeeded')
  elseif outcome == 'failed' then
    redis.call('HSET', runKey, 'error', ARGV[6], 'finishedAt', now)
    set_status(base, runKey, runId, 'running', 'failed')
  else
    redis.call('HSET', runKey, 'error', ARGV[6], 'availableAt', ARGV[7])
    set_status(base, runKey, runId, 'running', 'scheduled')
    redis.call('ZADD', KEYS[4], ARGV[7], runId)
  end
end

if ARGV[8] == '1' then
  local nextRun = claim_next(base, KEYS[3], KEYS[2], ARGV[9], now, ARGV[10])
  if nextRun then return { code, nextRun[1], nextRun[2], nextRun[3] } end
end
return { code }
