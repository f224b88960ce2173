-- heartbeat: extends the leases of a worker's running runs in one call.
-- KEYS[1] leases zset
-- ARGV[1] base "{prefix}:"    ARGV[2] lease expiry (ms)
-- ARGV[3..] pairs of run id, lease token
-- Returns the ids of runs the worker no longer holds (canceled, taken over or gone).
--!include common.lua

local lost = {}
for i = 3, #ARGV, 2 do
  local runId = ARGV[i]
  local run = redis.call('HMGET', k_run(ARGV[1], runId), 'status', 'lease')
  if run[1] == 'running' and run[2] == ARGV[i + 1] then
    redis.call('ZADD', KEYS[1], 'XX', ARGV[2], runId)
  else
    lost[#lost + 1] = runId
  end
end
return lost
