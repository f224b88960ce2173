-- lease.lua: does the caller still hold the run's lease? Every script a worker calls for a run it
-- holds checks it first and writes nothing when it fails.

-- The statuses of a run whose worker runs its handler: waits, child runs and events are steps of
-- it (HELD, in status.lua, adds a compensating run: checkpoint, finish and heartbeat).
local RUNNING = { running = true }

-- Reads the run's status, lease token and `...` fields in one HMGET. Returns that reply when
-- `token` holds the run's lease in one of `statuses` (RUNNING or HELD); else nil and what the
-- caller is told: 'canceled' or 'terminated' when the run ended so (its worker stops the attempt
-- as such), 'lost' when its lease was taken over or the run is gone.
local function leased_run(runKey, token, statuses, ...)
  local run = redis.call('HMGET', runKey, 'status', 'lease', ...)
  if statuses[run[1]] and run[2] == token then return run end
  if run[1] == 'canceled' or run[1] == 'terminated' then return nil, run[1] end
  return nil, 'lost'
end
