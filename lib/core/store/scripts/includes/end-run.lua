-- end-run.lua: the one place a run stops running, and the one place a run ends. finish, reap,
-- cancel, terminate and the rate-limit refusal in admit.lua all end runs through end_run.
--!include keys.lua
--!include index.lua
--!include capacity.lua
--!include waiters.lua
--!include event-waits.lua
--!include run-events.lua

-- A running run gives back what it holds: its lease, its mutex and its workflow concurrency slot
-- (each handed to the next parked run). `slot` is the run's `slot` field, set while it holds one.
-- `ended`: the run ends for good: end_run empties its `lease` field in the write that ends it,
-- and its `slot` field stays (read only while a run runs; `resume` deletes both).
local function stop_running(base, runId, leasesKey, workflow, mutex, slot, ended)
  redis.call('ZREM', leasesKey, runId)
  if not ended then redis.call('HDEL', k_run(base, runId), 'lease', 'slot') end
  release_slots(base, runId, workflow, mutex, slot)
end

-- What an end message carries at most: a larger result is left out, and a waiter reads the run.
local ENDED_INLINE_MAX = 65536

-- Tells the clients waiting for this run (handle.result, waitForRun) that it ended, with its
-- result, so they need no read: "<id>\n<status>\n<output JSON | error JSON | cancel reason>".
-- PUBLISH costs next to nothing when no client listens.
local function publish_ended(base, runId, to, result, fields)
  local payload = result
  if to == 'canceled' then
    payload = ''
    for i = 1, #(fields or {}), 2 do
      if fields[i] == 'cancelReason' then payload = fields[i + 1] end
    end
  end
  local message = runId .. '\n' .. to
  if #payload <= ENDED_INLINE_MAX then message = message .. '\n' .. payload end
  redis.call('PUBLISH', k_ended_channel(base), message)
end

-- Ends a run for good: `to` is 'succeeded', 'failed', 'canceled', 'compensation_failed' or
-- 'terminated'; `result` is its output JSON (succeeded) or error JSON; `fields` more hash fields
-- (pairs) written with the status.
--   from running or compensating: gives back its lease, mutex and slot (stop_running);
--   from scheduled: leaves its queue's schedule;
--   from queued:    its id stays in the ready list, dropped by the next claim; but when the id was
--                   already popped (`r.popped`: refused at admission), the capacity it was woken
--                   for goes to the next parked run now.
-- Then its status, finish time and status indexes (scored by finish time: lists show recent ends
-- first, retention deletes the oldest first), the parents waiting on it get its result, and the
-- clients waiting on it are told (publish_ended).
-- r = { from, workflow, queue, mutex, slot, waited, leasesKey, popped, sigs, evw }
local function end_run(base, runId, r, to, now, result, fields)
  if r.from == 'running' then
    stop_running(base, runId, r.leasesKey, r.workflow, r.mutex, r.slot, true)
  elseif r.from == 'compensating' then
    stop_running(base, runId, k_comp_leases(base), r.workflow, r.mutex, r.slot, true)
  elseif r.from == 'scheduled' then
    redis.call('ZREM', k_scheduled(base, r.queue), runId)
  elseif r.popped then
    offer_capacity(base, r.workflow, r.mutex)
  end
  local all = { 'status', to, 'finishedAt', now, to == 'succeeded' and 'output' or 'error', result }
  -- A held run's lease token is emptied in the same write (stop_running left the field).
  if r.from == 'running' or r.from == 'compensating' then all[#all + 1] = 'lease'; all[#all + 1] = '' end
  for _, v in ipairs(fields or {}) do all[#all + 1] = v end
  redis.call('HSET', k_run(base, runId), unpack(all))
  move_index(base, runId, r.workflow, r.from, to, now)
  emit_run_ended(base, runId, r.workflow, to, now, result)
  -- Signals nobody consumed die with the run. So do its event waits and cancelOn registrations.
  -- `r.sigs` / `r.evw` are the run's flags when the caller read them: false when it never had any,
  -- so a plain run reads no key of these features (nil: not read, look).
  if r.sigs ~= false then redis.call('DEL', k_signals(base, runId)) end
  if r.evw ~= false then drop_event_waits(base, runId) end
  if r.waited then notify_waiters(base, runId, to == 'succeeded', result, now) end
  publish_ended(base, runId, to, result, fields)
end
