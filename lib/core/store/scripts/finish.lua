-- finish: ends an attempt, writing any step records not yet checkpointed, releasing the lease, the
-- mutex and the concurrency slot, and claiming the next queued run of the same queue when the
-- worker has a free slot (so a busy worker needs no separate claim). Outcomes:
--   succeeded / failed: terminal; parents waiting on this run get its result and wake up.
--   retry: back to scheduled at the due time, for the next attempt.
--   wait:  back to scheduled (step.waitFor, or children to finish), the attempt not counted. When
--          one of the child-wait step records named in ARGV[10] was already resolved by a finished
--          child, the run is queued again at once instead.
-- KEYS[1] run hash            KEYS[2] leases zset
-- KEYS[3] queue ready list    KEYS[4] queue scheduled zset
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] now (ms)
-- ARGV[5] outcome             ARGV[6] output JSON (succeeded) or error JSON (failed, retry)
-- ARGV[7] due time (ms) for retry / wait, 0 = no time (wait for a child without timeout)
-- ARGV[8] lease token for the next run, or '' to claim none
-- ARGV[9] lease (ms)          ARGV[10] awaited child step fields, newline-separated (wait), or ''
-- ARGV[11..] pairs of step field, step record JSON
-- Returns { code } or { code, nextRunId, next flat run hash }
--   code: 'ok' | 'canceled' (run was canceled meanwhile) | 'lost' (lease taken over or run gone)
--!include common.lua

local base, runId, token, now, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
assert_writable(base)
local runKey = KEYS[1]
local code = 'ok'
local run = redis.call('HMGET', runKey, 'status', 'lease', 'createdAt', 'workflow', 'mutex', 'slot', 'waited')
if run[1] ~= 'running' or run[2] ~= token then
  code = 'lost'
  if run[1] == 'canceled' then code = 'canceled' end
else
  local fields = {}
  for i = 11, #ARGV do fields[#fields + 1] = ARGV[i] end
  local status, score = outcome, now
  if outcome == 'succeeded' then
    table.insert(fields, 'output'); table.insert(fields, ARGV[6])
    table.insert(fields, 'finishedAt'); table.insert(fields, now)
  elseif outcome == 'failed' then
    table.insert(fields, 'error'); table.insert(fields, ARGV[6])
    table.insert(fields, 'finishedAt'); table.insert(fields, now)
  else
    status, score = 'scheduled', run[3]
    if outcome == 'retry' then
      table.insert(fields, 'error'); table.insert(fields, ARGV[6])
    else
      table.insert(fields, 'resume'); table.insert(fields, '1')
      for field in string.gmatch(ARGV[10], '[^\n]+') do
        local awaited = redis.call('HGET', runKey, field)
        if awaited and string.sub(awaited, 1, 2) ~= '[3' then status = 'queued' end
      end
    end
    if tonumber(ARGV[7]) > 0 then table.insert(fields, 'availableAt'); table.insert(fields, ARGV[7]) end
    if status == 'queued' then
      redis.call('LPUSH', KEYS[3], runId)
    elseif tonumber(ARGV[7]) > 0 then
      redis.call('ZADD', KEYS[4], ARGV[7], runId)
    end
  end
  table.insert(fields, 'status'); table.insert(fields, status)
  redis.call('HSET', runKey, unpack(fields))
  if run[6] then redis.call('HDEL', runKey, 'lease', 'slot') else redis.call('HDEL', runKey, 'lease') end
  redis.call('ZREM', KEYS[2], runId)
  move_index(base, runId, run[4], 'running', status, score)
  release_slots(base, runId, run[4], run[5], run[6])
  if run[7] and (outcome == 'succeeded' or outcome == 'failed') then
    notify_waiters(base, runId, outcome == 'succeeded', ARGV[6], now)
  end
end

if ARGV[8] ~= '' then
  local nextRun = claim_next(base, KEYS[3], KEYS[2], ARGV[8], now, ARGV[9])
  if nextRun then return { code, nextRun[1], nextRun[2] } end
end
return { code }
