-- cron-fire: fires one cron tick exactly once, whichever worker gets here first: the tick's time
-- must still be the cron's next time (compare-and-set), which moves to the following tick. The run
-- id "cron.<cronId>.<tickMs>" is deterministic as well. The tick is skipped when the workflow is
-- at its maxConcurrency.
-- KEYS[1] cron next-time zset
-- ARGV: base cronId tick next workflow input now
-- ARGV[1] base "{prefix}:"    ARGV[2] cron id     ARGV[3] tick time (ms, the expected score)
-- ARGV[4] following tick (ms) ARGV[5] workflow    ARGV[6] input JSON  ARGV[7] now (ms)
-- Returns 'fired' | 'skipped' (at maxConcurrency) | 'taken' (another worker fired it) | 'unknown'
--!include writable.lua
--!include keys.lua
--!include start-run.lua

local base, cronId, tick, now = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[7])
assert_writable(base)
local current = redis.call('ZSCORE', KEYS[1], cronId)
if not current or tonumber(current) ~= tonumber(tick) then return 'taken' end
redis.call('ZADD', KEYS[1], ARGV[4], cronId)
local workflow = ARGV[5]
local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'maxAttempts', 'maxConcurrency')
if not meta[1] then return 'unknown' end
local limit = tonumber(meta[3] or '0')
if limit > 0 and redis.call('ZCARD', k_active(base, workflow)) >= limit then return 'skipped' end
start_run(base, { runId = 'cron.' .. cronId .. '.' .. tick, workflow = workflow, queue = meta[1], maxAttempts = meta[2] or '1',
  input = ARGV[6], now = now, availableAt = now, ifAbsent = true })
return 'fired'
