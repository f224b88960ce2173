-- cancel: makes a queued, scheduled or running run canceled at once, and with it every unfinished
-- child it waits on (step.runWorkflow), recursively. A queued run's id stays in the ready (or
-- parked) list and is dropped by the next claim; a running run loses its lease, mutex and slot,
-- and its worker is told on the cancel channel (and, as a safety net, by its next checkpoint or
-- heartbeat). Parents waiting on a canceled run get a CanceledError step result.
-- KEYS[1] run hash            KEYS[2] leases zset
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] now (ms)
-- ARGV[4] error JSON          ARGV[5] reason      ARGV[6] cancel channel
-- Returns 'ok' when canceled now, else the unchanged terminal status, or 'missing'
--!include common.lua

local base, now = ARGV[1], ARGV[3]
assert_writable(base)

local function cancel_one(runId, errorJson, reason)
  local runKey = k_run(base, runId)
  local run = redis.call('HMGET', runKey, 'status', 'queue', 'workflow', 'mutex', 'slot', 'waited')
  local status = run[1]
  if not status then return 'missing' end
  if TERMINAL[status] then return status end
  if status == 'scheduled' then
    redis.call('ZREM', k_scheduled(base, run[2]), runId)
  elseif status == 'running' then
    redis.call('ZREM', KEYS[2], runId)
    redis.call('HDEL', runKey, 'lease', 'slot')
    release_slots(base, runId, run[3], run[4], run[5])
    redis.call('PUBLISH', ARGV[6], runId)
  end
  redis.call('HSET', runKey, 'status', 'canceled', 'error', errorJson, 'cancelReason', reason, 'finishedAt', now)
  move_index(base, runId, run[3], status, 'canceled', now)
  if run[6] then notify_waiters(base, runId, false, errorJson, now) end
  return 'ok'
end

local result = cancel_one(ARGV[2], ARGV[4], ARGV[5])
if result ~= 'ok' then return result end
local stack = { ARGV[2] }
while #stack > 0 do
  local parentId = table.remove(stack)
  for _, childId in ipairs(redis.call('SMEMBERS', k_children(base, parentId))) do
    local message = 'Run "' .. childId .. '" was canceled because its parent run "' .. parentId .. '" was canceled.'
    local errorJson = cjson.encode({ name = 'CanceledError', message = message })
    if cancel_one(childId, errorJson, 'parent canceled') == 'ok' then stack[#stack + 1] = childId end
  end
end
return 'ok'
