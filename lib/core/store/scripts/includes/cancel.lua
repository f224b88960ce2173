-- cancel.lua: ending a run from outside (cancel or terminate), and with it every unfinished child
-- it waits on, recursively. Called by cancel-2.lua (cancelRun), terminate-2.lua (terminate),
-- delete-run-2.lua (deleteRun with force) and by an emitted event matching a run's cancelOn.
--!include status.lua
--!include keys.lua
--!include end-run.lua
--!include index.lua
--!include event-waits.lua
--!include run-events.lua

-- True when a step of the run completed with a compensation not yet run nor committed away
-- (`c:<step>` = '0', written by the worker with the step's record).
local function has_pending_compensation(runKey)
  local all = redis.call('HGETALL', runKey)
  for i = 1, #all, 2 do
    if all[i + 1] == '0' and string.sub(all[i], 1, 2) == 'c:' then return true end
  end
  return false
end

-- A queued run's id stays in the ready (or parked) list and is dropped by the next claim; a
-- running (or compensating) run loses its lease, mutex and slot, and its worker is told on the
-- cancel channel (and, as a safety net, by its next checkpoint or heartbeat). Parents waiting on
-- the run get its error as a failed step result. `to` is 'canceled' or 'terminated';
-- `child_error(childId, parentId)` gives a child's error JSON. The reason is kept in the run's
-- `cancelReason` field. With `compensate` (cancel only), a run that has compensations to run
-- becomes `compensating` instead (`compensate` = 'canceled', its error and reason stored) and is
-- put first in its queue, for a worker to run them; it ends `canceled` after, and its children
-- alike. A compensating run is not canceled again, but a terminate ends it at once. Returns 'ok'
-- when ended now, else the unchanged status of a run it leaves alone, or 'missing'.
local function end_run_tree(base, runId, to, now, errorJson, reason, child_error, compensate)
  local function end_one(id, json, why)
    local runKey = k_run(base, id)
    local run = redis.call('HMGET', runKey, 'status', 'queue', 'workflow', 'mutex', 'slot', 'waited', 'createdAt')
    local status = run[1]
    if not status then return 'missing' end
    if TERMINAL[status] or (status == 'compensating' and to == 'canceled') then return status end
    if compensate and has_pending_compensation(runKey) then
      if status == 'running' then
        stop_running(base, id, k_leases(base), run[3], run[4], run[5])
        redis.call('PUBLISH', k_cancel_channel(base), id)
      elseif status == 'scheduled' then
        redis.call('ZREM', k_scheduled(base, run[2]), id)
      end
      -- It no longer waits for anything: an event must not wake it.
      drop_event_waits(base, id)
      redis.call('HSET', runKey, 'status', 'compensating', 'compensate', 'canceled', 'error', json, 'cancelReason', why)
      move_index(base, id, run[3], status, 'compensating', run[7])
      redis.call('LPUSH', k_ready(base, run[2]), id)
      emit_event(base, 'run.compensating', id, run[3], tonumber(now), { 'error', error_message(json) })
      return 'ok'
    end
    end_run(base, id, { from = status, queue = run[2], workflow = run[3], mutex = run[4], slot = run[5], waited = run[6], leasesKey = k_leases(base) },
      to, now, json, { 'cancelReason', why })
    if HELD[status] then
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

-- Cancels a run and the unfinished children it waits on (CanceledError); see `compensate` above.
local function cancel_run(base, runId, now, errorJson, reason, compensate)
  return end_run_tree(base, runId, 'canceled', now, errorJson, reason, function(childId, parentId)
    local message = 'Run "' .. childId .. '" was canceled because its parent run "' .. parentId .. '" was canceled.'
    return cjson.encode({ name = 'CanceledError', message = message })
  end, compensate)
end

-- Terminates a run and the unfinished children it waits on (RunTerminatedError): no compensation
-- (a compensating run stops compensating), no onFailure, and the running attempt's signal aborts.
local function terminate_run(base, runId, now, errorJson, reason)
  return end_run_tree(base, runId, 'terminated', now, errorJson, reason, function(childId, parentId)
    local message = 'Run "' .. childId .. '" was terminated: its parent run "' .. parentId .. '" was terminated.'
    return cjson.encode({ name = 'RunTerminatedError', message = message,
      fields = { runId = childId, reason = 'its parent run "' .. parentId .. '" was terminated' } })
  end)
end
