-- fan-out.lua: one run per workflow subscribed to an event.
--!include keys.lua
--!include start-run.lua

local function fan_out(base, subsKey, eventId, payload, now)
  local runIds = {}
  local subscribers = redis.call('SMEMBERS', subsKey)
  table.sort(subscribers)
  for _, workflow in ipairs(subscribers) do
    local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'maxAttempts')
    if not meta[1] then
      redis.call('SREM', subsKey, workflow)
    else
      -- Event runs have no definition at hand: the registry's static flow-control keys apply.
      local runId = start_run(base, { runId = eventId .. '.' .. workflow, workflow = workflow, queue = meta[1],
        maxAttempts = meta[2] or '1', input = payload, now = now, availableAt = now, ifAbsent = true })
      if runId then runIds[#runIds + 1] = runId end
    end
  end
  return runIds
end
