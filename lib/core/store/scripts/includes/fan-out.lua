-- fan-out.lua: an event arrives: one run per workflow subscribed to it, and the runs waiting for
-- it (step.waitForEvent) or canceled by it (cancelOn) whose match its payload fields equal.
--!include keys.lua
--!include status.lua
--!include start-run.lua
--!include step-record.lua
--!include wake.lua
--!include event-waits.lua
--!include cancel.lua
--!include run-events.lua
--!include batch.lua

-- Hands the event to the runs whose waits match it. `fields`: the payload's top-level scalar
-- fields (see matching_event_waits). Waits registered by runs that ended are dropped as found.
local function deliver_event(base, event, payload, fields, now)
  for _, wait in ipairs(matching_event_waits(base, event, fields)) do
    local runId, field, hash, shape = wait[1], wait[2], wait[3], wait[4]
    local runKey = k_run(base, runId)
    if field == '' then
      local message = 'Run "' .. runId .. '" was canceled by event "' .. event .. '" (cancelOn).'
      cancel_run(base, runId, now, cjson.encode({ name = 'CanceledError', message = message }), 'event ' .. event)
      unregister_event_wait(base, runId, event, shape, hash, field)
    else
      local run = redis.call('HMGET', runKey, 'status', 'queue', 'createdAt', 'workflow')
      -- An event branch of step.waitForAny registers '<step field>|<branch key>' ('|' is in neither).
      local stepField, branchKey = string.match(field, '^([^|]*)|(.*)$')
      local waiting = redis.call('HGET', runKey, stepField or field)
      local record = nil
      if run[1] and not TERMINAL[run[1]] then
        if branchKey then
          if is_race_wait(waiting) then record = race_won(waiting, branchKey, true, payload, now) end
        elseif is_event_wait(waiting) then
          record = resolved_record(waiting, true, payload, now)
        end
      end
      unregister_event_wait(base, runId, event, shape, hash, field)
      if record then
        resolve_wait(base, runId, run, stepField or field, record)
        emit_event(base, 'run.signaled', runId, run[4], now, { 'event', event })
      end
    end
  end
end

local function fan_out(base, subsKey, eventId, event, payload, fields, now)
  deliver_event(base, event, payload, fields, now)
  local runIds = {}
  local subscribers = redis.call('SMEMBERS', subsKey)
  table.sort(subscribers)
  for _, workflow in ipairs(subscribers) do
    local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'maxAttempts', 'fbatch')
    if not meta[1] then
      redis.call('SREM', subsKey, workflow)
    elseif meta[3] then
      -- A batched workflow: the event joins its batch; the run starts with the batch.
      local runId = batch_event(base, workflow, meta[3], eventId, payload, fields, now)
      if runId then runIds[#runIds + 1] = runId end
    else
      -- Event runs have no definition at hand: the registry's static flow-control keys apply.
      local runId = start_run(base, { runId = eventId .. '.' .. workflow, workflow = workflow, queue = meta[1],
        maxAttempts = meta[2] or '1', input = payload, now = now, availableAt = now, ifAbsent = true })
      if runId then runIds[#runIds + 1] = runId end
    end
  end
  return runIds
end
