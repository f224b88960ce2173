-- cron-pause: pauses a cron (a workflow's trigger or a runtime schedule): its next time leaves the
-- zset, so no tick fires, and the pause's JSON (note, time) is kept; registry sync and schedule
-- keep a paused cron without a next time. Resuming deletes the pause and sets the next time.
-- KEYS[1] cron next-time zset
-- ARGV: base cronId paused next
-- ARGV[1] base "{prefix}:"    ARGV[2] cron id
-- ARGV[3] the pause's JSON, or '' to resume
-- ARGV[4] the next tick when resuming (ms), or '' when the schedule has none left (past endAt)
-- Returns 1, or 0 when there is no such cron
--!include writable.lua
--!include keys.lua
--!include cron.lua

local base, cronId = ARGV[1], ARGV[2]
assert_writable(base)
local def = redis.call('HGET', k_cron_defs(base), cronId)
if not def then return 0 end
if ARGV[3] ~= '' then
  redis.call('HSET', k_cron_paused(base), cronId, ARGV[3])
  redis.call('ZREM', KEYS[1], cronId)
  redis.call('HDEL', k_cron_buffered(base), cronId)
elseif redis.call('HDEL', k_cron_paused(base), cronId) == 1 and ARGV[4] ~= '' and not cron_limit_reached(base, cronId, def) then
  redis.call('ZADD', KEYS[1], ARGV[4], cronId)
end
return 1
