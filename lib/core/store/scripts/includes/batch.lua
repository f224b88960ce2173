-- batch.lua: events taken in batches (a workflow's `batch` option): one run per batch, whose input
-- is the JSON array of the events' payloads, oldest first. A batch starts when it holds maxSize
-- events (in the call that adds the last one), or when its timeout has passed since its first
-- event (fire-events-1.lua, on the workers' maintenance timer). Its run id is
-- '<first event id>.<workflow>', the id a run of that event alone would have had; its `batch`
-- field ('1') says its input is an array of payloads each stored as emitted (sealed apart).
--!include keys.lua
--!include start-run.lua

-- "<maxSize>|<timeoutMs>|<key field>" as the registry entry keeps it (`fbatch`).
local function parse_batch(spec)
  local size, timeout, field = string.match(spec, '^(%d+)|(%d+)|(.*)$')
  return tonumber(size), tonumber(timeout), field
end

-- The JSON text of a top-level field of an event's payload ('' when absent), from its fields
-- ('<name>\t<value JSON>' per line; with a codec, a digest of the value). Long values are hashed.
local function batch_key(fields, name)
  if name == '' then return '' end
  for line in string.gmatch(fields or '', '[^\n]+') do
    local k, v = string.match(line, '^([^\t]*)\t(.*)$')
    if k == name then
      if #v > 128 then return redis.sha1hex(v) end
      return v
    end
  end
  return ''
end

-- Starts the run of batch `group` ('<workflow>|<key>') with the events it holds, and empties it.
-- A batch whose workflow is no longer registered keeps its events and is looked at again in a minute.
local function start_batch(base, group, now)
  local workflow = string.match(group, '^([^|]*)|')
  local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'maxAttempts')
  if not meta[1] then
    redis.call('ZADD', k_batches_due(base), now + 60000, group)
    return nil
  end
  local batchKey = k_batch(base, group)
  local items = redis.call('LRANGE', batchKey, 0, -1)
  local firstId = redis.call('HGET', k_batch_first(base), group)
  redis.call('DEL', batchKey)
  redis.call('HDEL', k_batch_first(base), group)
  redis.call('ZREM', k_batches_due(base), group)
  if #items == 0 or not firstId then return nil end
  local runId = firstId .. '.' .. workflow
  start_run(base, { runId = runId, workflow = workflow, queue = meta[1], maxAttempts = meta[2] or '1',
    input = string.format('[%s]', table.concat(items, ',')), now = now, availableAt = now, ifAbsent = true, extra = { 'batch', '1' } })
  return runId
end

-- Adds an event to its batch of `workflow`; returns the run id when it filled the batch (started).
local function batch_event(base, workflow, spec, eventId, payload, fields, now)
  local size, timeout, field = parse_batch(spec)
  if not size then return nil end
  local group = workflow .. '|' .. batch_key(fields, field)
  local count = redis.call('RPUSH', k_batch(base, group), payload)
  if count == 1 then
    redis.call('HSET', k_batch_first(base), group, eventId)
    redis.call('ZADD', k_batches_due(base), now + timeout, group)
  end
  if count >= size then return start_batch(base, group, now) end
  return nil
end
