-- capacity.lua: handing a freed mutex or concurrency slot to the next parked run.
--!include keys.lua
--!include ready.lua

-- Puts the first still-queued run of a parked list back at the front of its queue.
local function unpark_one(base, parkedKey)
  for _ = 1, 1000 do
    local runId = redis.call('LPOP', parkedKey)
    if not runId then return end
    local run = redis.call('HMGET', k_run(base, runId), 'status', 'queue')
    if run[1] == 'queued' then
      redis.call('LPUSH', k_ready(base, run[2]), runId)
      return
    end
  end
end

-- Releases what a running run holds besides its lease: its mutex, its workflow concurrency slot
-- and its concurrency key's slot, each handed to the next parked run (a key's place goes back to
-- the end of its queue). Called whenever a run stops running.
-- `slot` is the run's `slot` field while it holds a slot: '1' (workflow), 'g<conc>' (its key's,
-- with the run's `conc`) or '1g<conc>'.
local function release_slots(base, runId, workflow, mutex, slot)
  if mutex and mutex ~= '' then
    local mutexKey = k_mutex(base, mutex)
    if redis.call('GET', mutexKey) == runId then
      redis.call('DEL', mutexKey)
      unpark_one(base, k_mutex_parked(base, mutex))
    end
  end
  if not slot then return end
  -- '1' (byte 49) first: a workflow slot; then 'g' and the key's conc.
  if workflow and string.byte(slot, 1) == 49 and redis.call('ZREM', k_active(base, workflow), runId) == 1 then
    unpark_one(base, k_parked(base, workflow))
  end
  local at = string.find(slot, 'g', 1, true)
  if at then release_group(base, runId, string.sub(slot, at + 1)) end
end

-- A queued run left without taking a slot or mutex (dropped as canceled, rate-limited, throttled):
-- the run woken for that capacity is gone, so wake the next parked run if the capacity is free.
local function offer_capacity(base, workflow, mutex)
  if workflow then
    local limit = tonumber(redis.call('HGET', k_meta(base, workflow), 'maxConcurrency') or '0')
    if limit > 0 and redis.call('ZCARD', k_active(base, workflow)) < limit then unpark_one(base, k_parked(base, workflow)) end
  end
  if mutex then
    local mutexKey = k_mutex(base, mutex)
    if not redis.call('GET', mutexKey) then unpark_one(base, k_mutex_parked(base, mutex)) end
  end
end
