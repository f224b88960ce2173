-- Shared fragment (after common.lua): creates one run per subscribed workflow of an event.
local function fan_out(base, subsKey, eventId, payload, now)
  local runIds = {}
  local subscribers = redis.call('SMEMBERS', subsKey)
  table.sort(subscribers)
  for _, workflow in ipairs(subscribers) do
    local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'maxAttempts')
    if not meta[1] then
      redis.call('SREM', subsKey, workflow)
    else
      local runId = eventId .. '.' .. workflow
      create_run(base, runId, workflow, meta[1], meta[2] or '1', payload, now, now, nil, true)
      runIds[#runIds + 1] = runId
    end
  end
  return runIds
end
