-- cron-fire: fires one cron tick exactly once, whichever worker gets here first: the tick's time
-- must still be the cron's next time (compare-and-set), which moves to the following tick. The run
-- id "cron.<cronId>.<tickMs>" is deterministic as well, and the run holds its tick (`scheduledAt`).
-- Then the schedule's overlap policy, when its previous run (cron:last) has not ended: 'skip'
-- starts nothing, 'cancel-previous' cancels that run first, 'buffer-one' holds the tick
-- (cron:buffered) and checks again in a second, leaving the cron's next time there meanwhile.
-- The tick is skipped too when the workflow is at its maxConcurrency.
-- KEYS[1] cron next-time zset
-- ARGV: base cronId tick next workflow input now overlap mode limit priority
-- ARGV[1] base "{prefix}:"    ARGV[2] cron id     ARGV[3] tick time (ms, the expected score)
-- ARGV[4] following tick (ms; '' when the schedule has ended)    ARGV[5] workflow    ARGV[6] input JSON  ARGV[7] now (ms)
-- ARGV[8] overlap: 'skip' | 'allow' | 'cancel-previous' | 'buffer-one'
-- ARGV[10] the schedule's limit of runs, or '' (the run that reaches it ends the schedule)
-- ARGV[11] the priority of the schedule's runs, or '' (the workflow's)
-- ARGV[9] mode: 'tick' (a due tick), 'drop' (a missed tick: the next time moves, nothing fires), or
--         'manual' (trigger / backfill: no compare-and-set and the next time stays; 'buffer-one' skips)
-- Returns 'fired' | 'skipped' (at maxConcurrency) | 'overlap' (skipped: the previous run goes on) |
-- 'buffered' | 'dropped' | 'taken' (another worker fired it) | 'unknown'
--!include writable.lua
--!include keys.lua
--!include status.lua
--!include start-run.lua
--!include cancel.lua

local base, cronId, tick, now, overlap, mode = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[7]), ARGV[8], ARGV[9]
assert_writable(base)
local manual = mode == 'manual'
local bufferedKey = k_cron_buffered(base)
local runTick = tick
if not manual then
  local current = redis.call('ZSCORE', KEYS[1], cronId)
  if not current or tonumber(current) ~= tonumber(tick) then return 'taken' end
  -- A tick held by 'buffer-one' fires as itself, not as the time it was checked again.
  runTick = redis.call('HGET', bufferedKey, cronId) or tick
end

-- Moves the schedule to its following tick ('': none, it has ended), done with the held one (not
-- for a manual tick).
local function advance()
  if manual then return end
  if ARGV[4] == '' then redis.call('ZREM', KEYS[1], cronId) else redis.call('ZADD', KEYS[1], ARGV[4], cronId) end
  redis.call('HDEL', bufferedKey, cronId)
end

if mode == 'drop' then
  advance()
  return 'dropped'
end
local workflow = ARGV[5]
local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'maxAttempts', 'maxConcurrency')
if not meta[1] then
  advance()
  return 'unknown'
end

local lastKey = k_cron_last(base)
if overlap ~= 'allow' then
  local previous = redis.call('HGET', lastKey, cronId)
  local status = previous and redis.call('HGET', k_run(base, previous), 'status')
  if status and not TERMINAL[status] then
    if overlap == 'buffer-one' and not manual then
      redis.call('HSETNX', bufferedKey, cronId, runTick)
      redis.call('ZADD', KEYS[1], now + 1000, cronId)
      return 'buffered'
    elseif overlap == 'cancel-previous' then
      local message = 'Run "' .. previous .. '" was canceled: tick ' .. runTick .. ' of schedule "' .. cronId
        .. '" started the next run, and the schedule\'s overlap policy is cancel-previous.'
      cancel_run(base, previous, now, cjson.encode({ name = 'CanceledError', message = message }), 'overlap: cancel-previous', false)
    else
      advance()
      return 'overlap'
    end
  end
end

advance()
local limit = tonumber(meta[3] or '0')
if limit > 0 and redis.call('ZCARD', k_active(base, workflow)) >= limit then return 'skipped' end
local runId = 'cron.' .. cronId .. '.' .. runTick
start_run(base, { runId = runId, workflow = workflow, queue = meta[1], maxAttempts = meta[2] or '1',
  input = ARGV[6], now = now, availableAt = now, ifAbsent = true,
  extra = ARGV[11] ~= '' and { 'scheduledAt', runTick, 'priority', ARGV[11] } or { 'scheduledAt', runTick } })
redis.call('HSET', lastKey, cronId, runId)
-- A schedule with a limit ends with its last run: the count is of ticks' runs, not manual ones.
if ARGV[10] ~= '' and not manual and redis.call('HINCRBY', k_cron_count(base), cronId, 1) >= tonumber(ARGV[10]) then
  redis.call('ZREM', KEYS[1], cronId)
end
return 'fired'
