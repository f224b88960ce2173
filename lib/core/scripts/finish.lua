-- finish: ends an attempt (succeeded, failed, or retry = back to scheduled), writing any step
-- records not yet checkpointed, releasing the lease, and claiming the next queued run of the same
-- queue when the worker has a free slot (so a busy worker needs no separate claim).
-- KEYS[1] run hash            KEYS[2] leases zset
-- KEYS[3] queue ready list    KEYS[4] queue scheduled zset
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] now (ms)
-- ARGV[5] outcome: 'succeeded' | 'failed' | 'retry'
-- ARGV[6] output JSON (succeeded) or error JSON (failed, retry)
-- ARGV[7] retry due time (ms)  ARGV[8] lease token for the next run, or '' to claim none
-- ARGV[9] lease (ms)           ARGV[10..] pairs of step field, step record JSON
-- Returns { code } or { code, nextRunId, next flat run hash }
--   code: 'ok' | 'canceled' (run was canceled meanwhile) | 'lost' (lease taken over or run gone)
--!include common.lua

local base, runId, token, now, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local runKey = KEYS[1]
local code = 'ok'
local run = redis.call('HMGET', runKey, 'status', 'lease', 'createdAt')
if run[1] ~= 'running' or run[2] ~= token then
  code = 'lost'
  if run[1] == 'canceled' then code = 'canceled' end
else
  local fields = {}
  for i = 10, #ARGV do fields[#fields + 1] = ARGV[i] end
  local status, score
  if outcome == 'succeeded' then
    status, score = 'succeeded', now
    table.insert(fields, 'output'); table.insert(fields, ARGV[6])
    table.insert(fields, 'finishedAt'); table.insert(fields, now)
  elseif outcome == 'failed' then
    status, score = 'failed', now
    table.insert(fields, 'error'); table.insert(fields, ARGV[6])
    table.insert(fields, 'finishedAt'); table.insert(fields, now)
  else
    status, score = 'scheduled', run[3]
    table.insert(fields, 'error'); table.insert(fields, ARGV[6])
    table.insert(fields, 'availableAt'); table.insert(fields, ARGV[7])
    redis.call('ZADD', KEYS[4], ARGV[7], runId)
  end
  table.insert(fields, 'status'); table.insert(fields, status)
  redis.call('HSET', runKey, unpack(fields))
  redis.call('HDEL', runKey, 'lease')
  redis.call('ZREM', KEYS[2], runId)
  move_index(base, runId, 'running', status, score)
end

if ARGV[8] ~= '' then
  local nextRun = claim_next(base, KEYS[3], KEYS[2], ARGV[8], now, ARGV[9])
  if nextRun then return { code, nextRun[1], nextRun[2] } end
end
return { code }
