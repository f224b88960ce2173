-- signal: delivers a signal to a run. When the run waits for this signal name (step.waitForSignal),
-- the payload becomes that step's record and a suspended run is queued again at once (for a
-- step.waitForAny still undecided, the record of the race this signal wins); otherwise the
-- signal is buffered, oldest first, for the next wait on its name (at most ARGV[6] per run).
-- KEYS[1] run hash            KEYS[2] signals list of the run
-- ARGV: base runId name payload now max
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] signal name   ARGV[4] payload JSON
-- ARGV[5] now (ms)            ARGV[6] most buffered signals per run
-- Returns 'delivered' | 'buffered' | 'full' | 'ended' | 'missing'
--!include writable.lua
--!include keys.lua
--!include status.lua
--!include step-record.lua
--!include wake.lua
--!include run-events.lua

local base, runId, name, payload, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
assert_writable(base)
local run = redis.call('HMGET', KEYS[1], 'status', 'queue', 'createdAt', 'workflow')
if not run[1] then return 'missing' end
-- A compensating run is ending: it takes no signal.
if TERMINAL[run[1]] or run[1] == 'compensating' then return 'ended' end
local field = redis.call('HGET', KEYS[1], 'sigwait:' .. name)
if field then
  local waiting = redis.call('HGET', KEYS[1], field)
  local record
  if is_signal_wait(waiting) then
    record = resolved_record(waiting, true, payload, now)
  elseif is_race_wait(waiting) then
    -- A branch of step.waitForAny: this signal wins the race (the worker unregisters the others).
    local key = race_branch_key(redis.call('HGET', KEYS[1], race_field(field)), 's', name)
    if key then record = race_won(waiting, key, true, payload, now) end
  end
  if record then
    redis.call('HDEL', KEYS[1], 'sigwait:' .. name)
    resolve_wait(base, runId, run, field, record)
    emit_event(base, 'run.signaled', runId, run[4], now, { 'signal', name })
    return 'delivered'
  end
end
if redis.call('LLEN', KEYS[2]) >= tonumber(ARGV[6]) then return 'full' end
redis.call('RPUSH', KEYS[2], name .. '\n' .. payload)
-- The run has buffered signals: when it ends, end_run deletes them (a run without `sigs` skips that).
redis.call('HSET', KEYS[1], 'sigs', '1')
emit_event(base, 'run.signaled', runId, run[4], now, { 'signal', name })
return 'buffered'
