-- cancel.lua: ending a run from outside (cancel or terminate), and with it every unfinished child
-- it waits on, recursively. Called by cancel-2.lua (cancelRun), terminate-2.lua (terminate),
-- delete-run-2.lua (deleteRun with force) and by an emitted event matching a run's cancelOn.
--!include status.lua
--!include keys.lua
--!include end-run.lua

-- A queued run's id stays in the ready (or parked) list and is dropped by the next claim; a
-- running run loses its lease, mutex and slot, and its worker is told on the cancel channel (and,
-- as a safety net, by its next checkpoint or heartbeat). Parents waiting on the run get its error
-- as a failed step result. `to` is 'canceled' or 'terminated'; `child_error(childId, parentId)`
-- gives a child's error JSON. The reason is kept in the run's `cancelReason` field. Returns 'ok'
-- when ended now, else the unchanged terminal status, or 'missing'.
local function end_run_tree(base, runId, to, now, errorJson, reason, child_error)
  local function end_one(id, json, why)
    local runKey = k_run(base, id)
    local run = redis.call('HMGET', runKey, 'status', 'queue', 'workflow', 'mutex', 'slot', 'waited')
    local status = run[1]
    if not status then return 'missing' end
    if TERMINAL[status] then return status end
    end_run(base, id, { from = status, queue = run[2], workflow = run[3], mutex = run[4], slot = run[5], waited = run[6], leasesKey = k_leases(base) },
      to, now, json, { 'cancelReason', why })
    if status == 'running' then
      -- A terminated run's worker is told which end it was: "<id>\nterminated".
      redis.call('PUBLISH', k_cancel_channel(base), to == 'canceled' and id or (id .. '\n' .. to))
    end
    return 'ok'
  end

  local result = end_one(runId, errorJson, reason)
  if result ~= 'ok' then return result end
  local stack = { runId }
  while #stack > 0 do
    local parentId = table.remove(stack)
    for _, childId in ipairs(redis.call('SMEMBERS', k_children(base, parentId))) do
      if end_one(childId, child_error(childId, parentId), 'parent ' .. to) == 'ok' then stack[#stack + 1] = childId end
    end
  end
  return 'ok'
end

-- Cancels a run and the unfinished children it waits on (CanceledError).
local function cancel_run(base, runId, now, errorJson, reason)
  return end_run_tree(base, runId, 'canceled', now, errorJson, reason, function(childId, parentId)
    local message = 'Run "' .. childId .. '" was canceled because its parent run "' .. parentId .. '" was canceled.'
    return cjson.encode({ name = 'CanceledError', message = message })
  end)
end

-- Terminates a run and the unfinished children it waits on (RunTerminatedError): no compensation,
-- no onFailure, and the running attempt's signal aborts.
local function terminate_run(base, runId, now, errorJson, reason)
  return end_run_tree(base, runId, 'terminated', now, errorJson, reason, function(childId, parentId)
    local message = 'Run "' .. childId .. '" was terminated: its parent run "' .. parentId .. '" was terminated.'
    return cjson.encode({ name = 'RunTerminatedError', message = message,
      fields = { runId = childId, reason = 'its parent run "' .. parentId .. '" was terminated' } })
  end)
end
