-- event-waits.lua: runs waiting for an event whose payload matches given values
-- (step.waitForEvent) and runs to cancel on one (cancelOn). A wait is registered under the event
-- name and the sha1 of its match: its shape (the match's field names, sorted, tab-separated) and
-- the JSON text of each value, one per line. An emit looks up each shape waited on for the event
-- (a few, however many runs wait), so finding the waiting runs never scans them.
--!include keys.lua

-- The lookup hash of a match; `values` are the JSON texts of its values in shape order.
local function match_hash(shape, values)
  return redis.sha1hex(shape .. '\n' .. table.concat(values, '\n'))
end

local function wait_member(field, hash, event, shape)
  return field .. '\n' .. hash .. '\n' .. event .. '\n' .. shape
end

-- Registers run `runId` (its step `field`, or '' for cancelOn) as waiting for `event` matching `hash`.
local function register_event_wait(base, runId, event, shape, hash, field)
  if redis.call('SADD', k_event_wait(base, event, hash), runId .. '\n' .. field) == 1 then
    redis.call('HINCRBY', k_event_shapes(base, event), shape, 1)
  end
  redis.call('SADD', k_event_waits_of(base, runId), wait_member(field, hash, event, shape))
  -- The run has registrations: when it ends, end_run drops them (a run without `evw` skips that).
  redis.call('HSET', k_run(base, runId), 'evw', '1')
end

local function drop_wait(base, runId, event, shape, hash, field)
  if redis.call('SREM', k_event_wait(base, event, hash), runId .. '\n' .. field) == 1 then
    if redis.call('HINCRBY', k_event_shapes(base, event), shape, -1) <= 0 then
      redis.call('HDEL', k_event_shapes(base, event), shape)
    end
  end
end

-- Removes one registration (the wait ended: the event came or the timeout passed).
local function unregister_event_wait(base, runId, event, shape, hash, field)
  drop_wait(base, runId, event, shape, hash, field)
  redis.call('SREM', k_event_waits_of(base, runId), wait_member(field, hash, event, shape))
end

-- Removes every registration of a run that ended (cancelOn's included: resume registers them again).
-- A run without registrations (most runs) costs one SMEMBERS here.
local function drop_event_waits(base, runId)
  local key = k_event_waits_of(base, runId)
  local members = redis.call('SMEMBERS', key)
  if #members == 0 then return end
  for _, member in ipairs(members) do
    local field, hash, event, shape = string.match(member, '^([^\n]*)\n([^\n]*)\n([^\n]*)\n(.*)$')
    if field then drop_wait(base, runId, event, shape, hash, field) end
  end
  redis.call('DEL', key)
end

-- The registrations matching an emitted event: { { runId, field, hash, shape }... }. `fields` is
-- the payload's top-level scalar fields, one per line: '<name>\t<JSON text of the value>'.
local function matching_event_waits(base, event, fields)
  local shapes = redis.call('HKEYS', k_event_shapes(base, event))
  if #shapes == 0 then return {} end
  local values = {}
  for name, text in string.gmatch(fields, '([^\t\n]+)\t([^\n]*)') do values[name] = text end
  local found = {}
  for _, shape in ipairs(shapes) do
    local parts, complete = {}, true
    for name in string.gmatch(shape, '[^\t]+') do
      local text = values[name]
      if text == nil then complete = false break end
      parts[#parts + 1] = text
    end
    if complete then
      local hash = match_hash(shape, parts)
      for _, entry in ipairs(redis.call('SMEMBERS', k_event_wait(base, event, hash))) do
        local runId, field = string.match(entry, '^(.*)\n([^\n]*)$')
        if runId then found[#found + 1] = { runId, field, hash, shape } end
      end
    end
  end
  return found
end
