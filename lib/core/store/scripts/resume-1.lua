-- resume: puts a failed, canceled or terminated run back in its queue under the same id, to go on
-- from its first incomplete step (a compensation_failed run: back to compensating, to run the
-- compensations left): its succeeded step records stay (the replay returns them without running
-- them again), failed ones run again. The next claim counts the next attempt (the last + 1), and
-- the run gets a fresh budget: maxAttempts becomes its attempt + its workflow's maxAttempts (from
-- the registry; 1 when the workflow is not registered). It is queued like a new run, so admission
-- (mutex, concurrency, throttle, rate limit) applies at claim. An id a cancel left in a ready or
-- parked list stays there: claim starts a queued run once and drops it when popped again. A run
-- with a timeout gets a new deadline from its next claim. The child runs it waited on are linked
-- to it again (relink_children).
-- KEYS[1] run hash
-- ARGV: base runId now
-- ARGV[1] base "{prefix}:"    ARGV[2] run id    ARGV[3] now (ms)
-- Returns 'ok' when queued, 'missing', 'corrupt' (no workflow or queue), or the status of a run that
-- is not failed, canceled or terminated
--!include writable.lua
--!include keys.lua
--!include status.lua
--!include index.lua
--!include child-wait.lua
--!include run-events.lua

-- The child runs (step.runWorkflow) the run still waited on when it ended. One that ended since
-- could not write its result into an ended parent (notify_waiters skips it), so its result is
-- written now, as it would have been; one still going gets the run back as its waiter; one that
-- no longer exists (deleted, pruned) leaves a failed record, so the replay runs the step again,
-- as for any failed step (wait_on_child). Without this, the replay would wait for a child whose
-- end had already passed.
local function relink_children(base, runId, runKey, now)
  local all = redis.call('HGETALL', runKey)
  for i = 1, #all, 2 do
    local field, waiting = all[i], all[i + 1]
    local childId = child_wait_id(waiting)
    if childId then
      local record = wait_on_child(base, runId, field, childId, waiting, now)
      if record ~= waiting then redis.call('HSET', runKey, field, record) end
    end
  end
end

local base, runId = ARGV[1], ARGV[2]
assert_writable(base)
local run = redis.call('HMGET', KEYS[1], 'status', 'queue', 'workflow', 'attempt', 'createdAt')
local status, queue, workflow = run[1], run[2], run[3]
if not status then return 'missing' end
if status ~= 'failed' and status ~= 'canceled' and status ~= 'compensation_failed' and status ~= 'terminated' then return status end
if not queue or not workflow then return 'corrupt' end

if status == 'compensation_failed' then
  -- The compensations left run again: the run is compensating, first in its queue (the next
  -- claim hands it to a worker without admission); its error and `compensate` target stay.
  redis.call('HDEL', KEYS[1], 'compError', 'finishedAt', 'recoveries', 'lease', 'slot')
  redis.call('HSET', KEYS[1], 'status', 'compensating')
  move_index(base, runId, workflow, status, 'compensating', run[5])
  redis.call('LPUSH', k_ready(base, queue), runId)
  emit_event(base, 'run.resumed', runId, workflow, tonumber(ARGV[3]))
  return 'ok'
end

local budget = tonumber(redis.call('HGET', k_meta(base, workflow), 'maxAttempts') or '1') or 1
local attempt = tonumber(run[4] or '0') or 0
-- Without `resume`, claim counts a new attempt and the throttle and rate-limit windows count the
-- start again, as for any queued run (a run canceled while it waited still holds the field).
redis.call('HDEL', KEYS[1], 'error', 'finishedAt', 'cancelReason', 'output', 'recoveries', 'crashes', 'resume', 'cancelOn', 'deadline', 'lease', 'slot')
redis.call('HSET', KEYS[1], 'status', 'queued', 'maxAttempts', attempt + budget)
relink_children(base, runId, KEYS[1], tonumber(ARGV[3]))
move_index(base, runId, workflow, status, 'queued', run[5])
redis.call('RPUSH', k_ready(base, queue), runId)
emit_event(base, 'run.resumed', runId, workflow, tonumber(ARGV[3]))
return 'ok'
