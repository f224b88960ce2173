-- heartbeat: extends the leases of a worker's running runs in one call.
-- KEYS[1] leases zset
-- ARGV: base leaseUntil ...leases
-- ARGV[1] base "{prefix}:"    ARGV[2] lease expiry (ms)
-- ARGV[3..] pairs of run id, lease token
-- Returns the ids of runs the worker no longer holds (canceled, taken over or gone); a terminated
-- run's as "<id>\nterminated", so its attempt stops as terminated.
--!include keys.lua
--!include status.lua
--!include lease.lua

-- No write check here: a heartbeat must keep leases alive while Redis is full, so that a worker
-- waiting to store a step does not lose its run. PERSIST of the leases zset (which has no TTL)
-- is a write that never grows memory; after it, Redis lets the script's ZADD XX through, and
-- ZADD XX only moves scores of members that exist.
redis.call('PERSIST', KEYS[1])
local lost = {}
for i = 3, #ARGV, 2 do
  local runId = ARGV[i]
  local run, ended = leased_run(k_run(ARGV[1], runId), ARGV[i + 1], HELD)
  if run then
    redis.call('ZADD', run[1] == 'compensating' and k_comp_leases(ARGV[1]) or KEYS[1], 'XX', ARGV[2], runId)
  elseif ended == 'terminated' then
    lost[#lost + 1] = runId .. '\nterminated'
  else
    lost[#lost + 1] = runId
  end
end
return lost
