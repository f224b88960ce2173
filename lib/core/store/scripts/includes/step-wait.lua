-- step-wait.lua: a step that waits (step.waitForSignal, step.waitForEvent, step.waitForAny) for the
-- lease holder of a running run: the call's start, a signal taken from the run's buffer, and the
-- wait's timeout.
--!include writable.lua
--!include lease.lua
--!include step-record.lua

-- Checks that Redis takes writes and that the caller holds the run's lease, then reads the step's
-- record. Returns nil and the reply that ends the call: { 'lost' } when the caller no longer holds
-- the lease, { 'got', record } when the record already holds a payload (delivered while the run
-- was running, after its claim, or a retried call whose first reply was lost: never overwritten).
-- Else the waiting record to go on with: the stored one when `keep(stored)` is true, else `fresh`.
local function begin_wait(base, runKey, token, field, keep, fresh)
  assert_writable(base)
  if not leased_run(runKey, token, RUNNING) then return nil, { 'lost' } end
  local existing = redis.call('HGET', runKey, field)
  if existing and not is_waiting(existing) then return nil, { 'got', existing } end
  if keep(existing) then return existing end
  return fresh
end

-- Takes the oldest buffered signal whose name is a key of `names` out of the run's signal list
-- (entries '<name>\n<payload JSON>'). Returns names[name] and the signal's payload, or nil when
-- none of these names is buffered.
local function take_signal(signalsKey, names)
  for _, entry in ipairs(redis.call('LRANGE', signalsKey, 0, -1)) do
    local sep = string.find(entry, '\n', 1, true)
    local value = names[string.sub(entry, 1, sep - 1)]
    if value then
      redis.call('LREM', signalsKey, 1, entry)
      return value, string.sub(entry, sep + 1)
    end
  end
  return nil
end

-- When `now` is at or past the deadline of the waiting record `waiting`, writes the record of the
-- timed-out wait (a null payload) into the step's field and returns it; else nil.
local function wait_timed_out(runKey, field, waiting, now)
  local deadline = record_deadline(waiting)
  if deadline > 0 and tonumber(now) >= deadline then
    local record = resolved_record(waiting, true, 'null', now)
    redis.call('HSET', runKey, field, record)
    return record
  end
  return nil
end
