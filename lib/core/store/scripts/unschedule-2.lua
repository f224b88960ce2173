-- unschedule: removes a runtime schedule (client.schedule); its runs already started stay.
-- KEYS[1] cron definitions hash   KEYS[2] cron next-time zset
-- ARGV: base cronId
-- ARGV[1] base "{prefix}:"    ARGV[2] cron id ('@' + schedule id)
-- Returns 1 when the schedule existed, else 0.
--!include writable.lua
--!include cron.lua

local base, id = ARGV[1], ARGV[2]
assert_writable(base)
if not is_runtime_cron(id) then return redis.error_reply('ERR schedule ids start with @') end
return remove_cron(base, KEYS[1], KEYS[2], id) and 1 or 0
