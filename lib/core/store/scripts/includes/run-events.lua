-- run-events.lua: the one place a script writes to the event stream `{P}:events` (client.events()
-- reads it). The events of one script call are buffered and written by ONE XADD when the script
-- ends (the loader appends `flush_events()` to every script that includes this file): one entry
-- whose field/value pairs repeat, each `type` field starting the next event. The stream is trimmed
-- approximately to the last EVENTS_MAX_LEN entries (set from the last ARGV by events-max-len.lua);
-- nothing at all is written when the stream is off. Entries stay small: ids, names, times and
-- error messages, never inputs or outputs.
--!include keys.lua
--!include step-record.lua

-- More than this many events in one call (a fan-out to many runs) are split over several entries,
-- so that no XADD unpacks more arguments than Lua allows.
local EVENTS_PER_ENTRY = 400
-- The buffer: the XADD arguments of the entry so far (key, MAXLEN ~ n, *, then field/value pairs),
-- built by the first event of a call in one table constructor; `event_count` events in it.
local event_fields = nil
local event_count = 0

-- Writes the buffered events as one stream entry. Called once at the end of every script that
-- emits (by the loader), and by emit_event when an entry is full.
local function flush_events()
  if event_count == 0 then return end
  redis.call('XADD', unpack(event_fields))
  event_fields = nil
  event_count = 0
end

-- Empties the buffer: called before every call of a Redis Function, whose buffer outlives a call
-- (a script sent with EVALSHA starts with a new one).
local function reset_events()
  event_fields = nil
  event_count = 0
end

-- Buffers one event. `extra` holds more field/value pairs (step, attempt, error, retryAt,
-- waitingFor, signal); nil values are left out.
local function emit_event(base, type, runId, workflow, now, extra)
  if EVENTS_MAX_LEN <= 0 then return end
  if event_count == 0 then
    event_fields = { k_events(base), 'MAXLEN', '~', EVENTS_MAX_LEN_ARG, '*', 'type', type, 'runId', runId, 'workflow', workflow or '', 'at', now }
  else
    local n = #event_fields
    event_fields[n + 1] = 'type'
    event_fields[n + 2] = type
    event_fields[n + 3] = 'runId'
    event_fields[n + 4] = runId
    event_fields[n + 5] = 'workflow'
    event_fields[n + 6] = workflow or ''
    event_fields[n + 7] = 'at'
    event_fields[n + 8] = now
  end
  if extra then
    for i = 1, #extra, 2 do
      if extra[i + 1] ~= nil and extra[i + 1] ~= false then
        event_fields[#event_fields + 1] = extra[i]
        event_fields[#event_fields + 1] = extra[i + 1]
      end
    end
  end
  event_count = event_count + 1
  if event_count >= EVENTS_PER_ENTRY then flush_events() end
end

-- The message of an error JSON (`{ name, message, ... }`), or nil. Parsed in a protected call: a
-- damaged payload cannot raise an error after the script has written.
local function error_message(errorJson)
  if EVENTS_MAX_LEN <= 0 or errorJson == nil or errorJson == false or errorJson == '' then return nil end
  local ok, decoded = pcall(cjson.decode, errorJson)
  if ok and type(decoded) == 'table' and type(decoded.message) == 'string' then return decoded.message end
  return nil
end

-- Events for the step records a worker writes (checkpoint, finish): pairs of run-hash field and
-- value in `fields` from index `first`. A finished step record "s:<name>" = [1|0, seq, attempt,
-- finishedAt, ...] is step.completed / step.failed; a tries record "t:<name>" = [failures,
-- runAttempt, inAttempt, retryAt, error] with a retryAt is retry.scheduled (the step runs again
-- then), told after the step records, so a failed try reads step.failed, then retry.scheduled.
-- Other fields (progress, events, waits) say nothing. Returns the retryAt of a step retry among
-- them, or 0.
local function emit_step_events(base, runId, workflow, now, fields, first)
  if EVENTS_MAX_LEN <= 0 then return 0 end
  local retryAt = 0
  local retries = {}
  for i = first, #fields, 2 do
    local field, value = fields[i], fields[i + 1]
    local kind, step = string.sub(field, 1, 2), string.sub(field, 3)
    if kind == 's:' then
      local ok, attempt, at = finished_step(value)
      if ok == '1' then
        emit_event(base, 'step.completed', runId, workflow, at, { 'step', step, 'attempt', attempt })
      elseif ok == '0' then
        emit_event(base, 'step.failed', runId, workflow, at, { 'step', step, 'attempt', attempt,
          'error', failed_step_message(value) })
      end
    elseif kind == 't:' then
      local attempt, due, message = tries_retry(value)
      if due and tonumber(due) > 0 then
        retryAt = tonumber(due)
        retries[#retries + 1] = { 'step', step, 'attempt', attempt, 'retryAt', due, 'error', message }
      end
    end
  end
  for _, fields_of in ipairs(retries) do emit_event(base, 'retry.scheduled', runId, workflow, now, fields_of) end
  return retryAt
end

-- run.completed / run.failed / run.canceled / run.compensation_failed / run.terminated for a run that
-- ends (`to`), with the message of its error JSON (`result`) unless it succeeded. Called by end_run only.
local ENDED_EVENT = { succeeded = 'run.completed', failed = 'run.failed', canceled = 'run.canceled',
  compensation_failed = 'run.compensation_failed', terminated = 'run.terminated' }
local function emit_run_ended(base, runId, workflow, to, now, result)
  if EVENTS_MAX_LEN <= 0 then return end
  emit_event(base, ENDED_EVENT[to], runId, workflow, now, { 'error', to ~= 'succeeded' and error_message(result) or nil })
end
