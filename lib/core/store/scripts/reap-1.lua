-- reap: returns runs whose lease expired (their worker died or stalled) to the front of their
-- queue, releasing their mutex and concurrency slot. The interrupted attempt is not counted;
-- completed steps stay and are not run again. `recoveries` counts every expiry; `crashes` those in
-- a row (a checkpoint or finish by the lease holder deletes it). A run whose leases expired more
-- than ARGV[4] times in a row fails with RunCrashedError instead, naming the worker of its last
-- attempt, so a run that kills its worker every time cannot crash-loop the fleet.
-- Compensating runs (their leases in `comp-leases`) go back to their queue still compensating, or
-- end `compensation_failed` once interrupted more than ARGV[4] times (`recoveries`).
-- KEYS[1] leases zset
-- ARGV: base now batch maxRecoveries
-- ARGV[1] base "{prefix}:"    ARGV[2] now (ms)    ARGV[3] batch size   ARGV[4] max recoveries
-- Returns the ids of the recovered (or failed) runs.
--!include writable.lua
--!include keys.lua
--!include index.lua
--!include end-run.lua

local base = ARGV[1]
assert_writable(base)
local recovered = {}
local batch = tonumber(ARGV[3])

-- Compensating runs whose worker died: back to the front of their queue, still compensating; the
-- next worker replays the run and runs the compensations not stored as done.
local compLeases = k_comp_leases(base)
for _, runId in ipairs(redis.call('ZRANGEBYSCORE', compLeases, '-inf', ARGV[2], 'LIMIT', 0, batch)) do
  redis.call('ZREM', compLeases, runId)
  local runKey = k_run(base, runId)
  local run = redis.call('HMGET', runKey, 'status', 'queue', 'createdAt', 'workflow', 'mutex', 'slot', 'waited')
  if run[1] == 'compensating' then
    local recoveries = redis.call('HINCRBY', runKey, 'recoveries', 1)
    if recoveries > tonumber(ARGV[4]) then
      local message = 'The compensations of run "' .. runId .. '" were interrupted ' .. recoveries .. ' times: the worker ' ..
        'running them died or stopped renewing its lease each time. Fix the cause, then resume the run to run the ' ..
        'compensations that did not complete.'
      end_run(base, runId, { from = 'compensating', workflow = run[4], mutex = run[5], slot = run[6], waited = run[7] },
        'compensation_failed', ARGV[2], redis.call('HGET', runKey, 'error') or '{}',
        { 'compError', cjson.encode({ name = 'RunStalledError', message = message }) })
    else
      stop_running(base, runId, compLeases, run[4], run[5], run[6])
      redis.call('LPUSH', k_ready(base, run[2]), runId)
    end
    recovered[#recovered + 1] = runId
  end
end

local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, batch)
for _, runId in ipairs(expired) do
  redis.call('ZREM', KEYS[1], runId)
  local runKey = k_run(base, runId)
  local run = redis.call('HMGET', runKey, 'status', 'queue', 'createdAt', 'workflow', 'mutex', 'slot', 'waited', 'lease')
  if run[1] == 'running' then
    redis.call('HINCRBY', runKey, 'recoveries', 1)
    local crashes = redis.call('HINCRBY', runKey, 'crashes', 1)
    if crashes > tonumber(ARGV[4]) then
      -- A lease token is "<worker id>:<claim counter>" (Worker.nextLeaseToken).
      local workerId = string.match(run[8] or '', '^(.*):%d+$') or (run[8] or 'unknown')
      -- The same message as the RunCrashedError constructor (errors.ts) builds.
      local message = 'Run "' .. runId .. '" crashed its worker ' .. crashes .. ' times in a row (last on worker "' ..
        workerId .. '"): each attempt died or stopped renewing its lease (a crash, out of memory, or a blocked event ' ..
        'loop in this run?). It was failed so it stops taking workers down; fix the cause, then resume or re-run it.'
      local errorJson = cjson.encode({ name = 'RunCrashedError', message = message,
        fields = { runId = runId, crashes = crashes, workerId = workerId } })
      end_run(base, runId, { from = 'running', workflow = run[4], mutex = run[5], slot = run[6], waited = run[7], leasesKey = KEYS[1] },
        'failed', ARGV[2], errorJson)
    else
      stop_running(base, runId, KEYS[1], run[4], run[5], run[6])
      redis.call('HSET', runKey, 'status', 'queued', 'resume', '1')
      move_index(base, runId, run[4], 'running', 'queued', run[3])
      redis.call('LPUSH', k_ready(base, run[2]), runId)
    end
    recovered[#recovered + 1] = runId
  end
end
return recovered
