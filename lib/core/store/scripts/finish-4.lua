-- finish: ends an attempt, writing any step records not yet checkpointed, releasing the lease, the
-- mutex and the concurrency slot, and claiming the next queued run of the same queue when the
-- worker has a free slot (so a busy worker needs no separate claim). Outcomes:
--   succeeded / failed: terminal; parents waiting on this run get its result and wake up.
--   retry: back to scheduled at the due time, for the next attempt.
--   wait:  back to scheduled (step.waitFor, or children to finish), the attempt not counted, with
--          the `wait` field naming what it waits for (index.lua: the first awaited step's target,
--          else a sleep; none for a step retry) and the run in its `waiting:` indexes. When
--          one of the waiting step records named in ARGV[10] was already resolved (a finished
--          child, a signal), the run is queued again at once instead.
--   compensate: the run failed for good and has compensations to run (saga): `compensating`, its
--          error (ARGV[6]) stored, `compensate` = 'failed' (the status it ends in); the caller
--          keeps the lease and runs the compensations.
-- A compensating run (held by the caller) ends with 'failed' or 'canceled' (its compensations all
-- ran; the caller sends `compensated` among the fields) or 'compensation_failed'; ARGV[6] is then
-- the run's original error.
-- KEYS[1] run hash            KEYS[2] leases zset
-- KEYS[3] queue ready list    KEYS[4] queue scheduled zset
-- ARGV: base runId token now outcome payload dueAt nextToken leaseUntil waitFields ...records
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] now (ms)
-- ARGV[5] outcome             ARGV[6] output JSON (succeeded) or error JSON (failed, retry)
-- ARGV[7] due time (ms) for retry / wait, 0 = no time (wait for a child without timeout)
-- ARGV[8] lease token for the next run, or '' to claim none
-- ARGV[9] lease expiry (ms, real time)        ARGV[10] awaited child step fields, newline-separated (wait), or ''
-- ARGV[11..] pairs of step field, step record JSON
-- Returns { code } or { code, nextRunId, next flat run hash }
--   code: 'ok' | 'canceled' | 'terminated' (the run ended so meanwhile) | 'lost' (lease taken over or run gone)
--!include writable.lua
--!include status.lua
--!include lease.lua
--!include index.lua
--!include end-run.lua
--!include claim.lua
--!include step-record.lua
--!include run-events.lua

local base, runId, token, now, outcome = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
assert_writable(base)
local runKey = KEYS[1]
local code = 'ok'
local run, lost = leased_run(runKey, token, HELD, 'createdAt', 'workflow', 'mutex', 'slot', 'waited', 'crashes', 'sigs', 'evw')
if not run then
  code = lost
else
  -- The attempt got to its end: the crashes counted by reap are no longer in a row.
  if run[8] then redis.call('HDEL', runKey, 'crashes') end
  local fields = {}
  for i = 11, #ARGV do fields[#fields + 1] = ARGV[i] end
  local stepRetryAt = emit_step_events(base, runId, run[4], now, fields, 1)
  if TERMINAL[outcome] then
    end_run(base, runId, { from = run[1], workflow = run[4], mutex = run[5], slot = run[6], waited = run[7], leasesKey = KEYS[2],
      sigs = run[9], evw = run[10] }, outcome, now, ARGV[6], fields)
  elseif outcome == 'compensate' then
    table.insert(fields, 'error'); table.insert(fields, ARGV[6])
    table.insert(fields, 'compensate'); table.insert(fields, 'failed')
    table.insert(fields, 'status'); table.insert(fields, 'compensating')
    redis.call('HSET', runKey, unpack(fields))
    move_index(base, runId, run[4], 'running', 'compensating', run[3])
    -- The lease stays, in the compensating runs' leases zset.
    redis.call('ZADD', k_comp_leases(base), redis.call('ZSCORE', KEYS[2], runId) or ARGV[9], runId)
    redis.call('ZREM', KEYS[2], runId)
    emit_event(base, 'run.compensating', runId, run[4], now, { 'error', error_message(ARGV[6]) })
  else
    local status = 'scheduled'
    if outcome == 'retry' then
      table.insert(fields, 'error'); table.insert(fields, ARGV[6])
      emit_event(base, 'retry.scheduled', runId, run[4], now, { 'attempt', redis.call('HGET', runKey, 'attempt'),
        'retryAt', ARGV[7], 'error', error_message(ARGV[6]) })
    else
      table.insert(fields, 'resume'); table.insert(fields, '1')
      -- What the run waits for: the first awaited step's record, else a step retry or a timer.
      local waitingFor = (stepRetryAt > 0 and stepRetryAt == tonumber(ARGV[7])) and 'retry' or 'sleep'
      local found, waitName = false, ''
      for field in string.gmatch(ARGV[10], '[^\n]+') do
        local awaited = redis.call('HGET', runKey, field)
        if awaited and not is_waiting(awaited) then status = 'queued' end
        if not found and awaited then
          found = true
          local kind, name = waiting_target(awaited)
          if kind then waitingFor, waitName = (kind == 'any' and 'race' or kind), name end
        end
      end
      emit_event(base, 'run.waiting', runId, run[4], now, { 'waitingFor', waitingFor,
        'retryAt', tonumber(ARGV[7]) > 0 and ARGV[7] or nil })
      -- The run's `wait` (index.lua), written with its suspension; a step retry is no wait.
      if status == 'scheduled' and waitingFor ~= 'retry' then
        local wait = (waitingFor == 'race' and 'any' or waitingFor) .. '\n' .. waitName .. '\n' .. ARGV[7]
        table.insert(fields, 'wait'); table.insert(fields, wait)
        index_wait(base, runId, wait, run[3])
      end
    end
    if tonumber(ARGV[7]) > 0 then table.insert(fields, 'availableAt'); table.insert(fields, ARGV[7]) end
    if status == 'queued' then
      redis.call('LPUSH', KEYS[3], runId)
    elseif tonumber(ARGV[7]) > 0 then
      redis.call('ZADD', KEYS[4], ARGV[7], runId)
    end
    table.insert(fields, 'status'); table.insert(fields, status)
    redis.call('HSET', runKey, unpack(fields))
    stop_running(base, runId, KEYS[2], run[4], run[5], run[6])
    move_index(base, runId, run[4], 'running', status, run[3])
  end
end

if ARGV[8] ~= '' then
  local nextRun = claim_next(base, KEYS[3], KEYS[2], ARGV[8], now, ARGV[9])
  if nextRun and nextRun[1] ~= '' then return { code, nextRun[1], nextRun[2] } end
end
return { code }
