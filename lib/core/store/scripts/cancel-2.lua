-- cancel: makes a queued, scheduled or running run canceled at once, and with it every unfinished
-- child it waits on (step.runWorkflow), recursively. A queued run's id stays in the ready (or
-- parked) list and is dropped by the next claim; a running run loses its lease, mutex and slot,
-- and its worker is told on the cancel channel (and, as a safety net, by its next checkpoint or
-- heartbeat). Parents waiting on a canceled run get a CanceledError step result.
-- KEYS[1] run hash            KEYS[2] leases zset
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] now (ms)
-- ARGV[4] error JSON          ARGV[5] reason      ARGV[6] cancel channel
-- Returns 'ok' when canceled now, else the unchanged terminal status, or 'missing'
--!include status.lua
--!include writable.lua
--!include keys.lua
--!include end-run.lua

local base, now = ARGV[1], ARGV[3]
assert_writable(base)

local function cancel_one(runId, errorJson, reason)
  local runKey = k_run(base, runId)
  local run = redis.call('HMGET', runKey, 'status', 'queue', 'workflow', 'mutex', 'slot', 'waited')
  local status = run[1]
  if not status then return 'missing' end
  if TERMINAL[status] then return status end
  end_run(base, runId, { from = status, queue = run[2], workflow = run[3], mutex = run[4], slot = run[5], waited = run[6], leasesKey = KEYS[2] },
    'canceled', now, errorJson, { 'cancelReason', reason })
  if status == 'running' then redis.call('PUBLISH', ARGV[6], runId) end
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
