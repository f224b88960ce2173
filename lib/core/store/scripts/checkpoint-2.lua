-- checkpoint: stores completed step records and extends the lease, only while the caller still
-- holds the run's lease. The reply tells the worker whether the run was canceled meanwhile.
-- KEYS[1] run hash            KEYS[2] leases zset
-- ARGV[1] run id              ARGV[2] lease token  ARGV[3] lease expiry (ms)
-- ARGV[4..] pairs of step field ("s:<name>"), step record JSON
-- Returns 'ok' | 'canceled' (run canceled) | 'lost' (lease taken over or run gone)

local run = redis.call('HMGET', KEYS[1], 'status', 'lease')
if run[1] ~= 'running' or run[2] ~= ARGV[2] then
  if run[1] == 'canceled' then return 'canceled' end
  return 'lost'
end
for i = 4, #ARGV, 2 do
  redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
end
redis.call('ZADD', KEYS[2], 'XX', ARGV[3], ARGV[1])
return 'ok'
