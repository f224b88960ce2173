-- cancel.lua: canceling a run, and with it every unfinished child it waits on, recursively. Called
-- by cancel-2.lua (cancelRun) and by an emitted event matching a run's cancelOn.
--!include status.lua
--!include keys.lua
--!include end-run.lua

-- A queued run's id stays in the ready (or parked) list and is dropped by the next claim; a
-- running run loses its lease, mutex and slot, and its worker is told on the cancel channel (and,
-- as a safety net, by its next checkpoint or heartbeat). Parents waiting on a canceled run get a
-- CanceledError step result. Returns 'ok' when canceled now, else the unchanged terminal status,
-- or 'missing'.
local function cancel_run(base, runId, now, errorJson, reason)
  local function cancel_one(id, json, why)
    local runKey = k_run(base, id)
    local run = redis.call('HMGET', runKey, 'status', 'queue', 'workflow', 'mutex', 'slot', 'waited')
    local status = run[1]
    if not status then return 'missing' end
    if TERMINAL[status] then return status end
    end_run(base, id, { from = status, queue = run[2], workflow = run[3], mutex = run[4], slot = run[5], waited = run[6], leasesKey = k_leases(base) },
      'canceled', now, json, { 'cancelReason', why })
    if status == 'running' then redis.call('PUBLISH', k_cancel_channel(base), id) end
    return 'ok'
  end

  local result = cancel_one(runId, errorJson, reason)
  if result ~= 'ok' then return result end
  local stack = { runId }
  while #stack > 0 do
    local parentId = table.remove(stack)
    for _, childId in ipairs(redis.call('SMEMBERS', k_children(base, parentId))) do
      local message = 'Run "' .. childId .. '" was canceled because its parent run "' .. parentId .. '" was canceled.'
      local json = cjson.encode({ name = 'CanceledError', message = message })
      if cancel_one(childId, json, 'parent canceled') == 'ok' then stack[#stack + 1] = childId end
    end
  end
  return 'ok'
end
