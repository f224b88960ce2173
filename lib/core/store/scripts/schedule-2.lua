-- schedule: adds or replaces a runtime schedule (client.schedule) in the cron definitions, where
-- the cron ticker fires it like a workflow's cron trigger, once per tick across workers. An
-- unchanged definition keeps its next tick. A workflow the caller has no definition of must be
-- registered, and must not compute a flow-control key with a function (runs of a tick are
-- created here, in Redis).
-- KEYS[1] cron definitions hash   KEYS[2] cron next-time zset
-- ARGV: base cronId def next workflow local
-- ARGV[1] base "{prefix}:"    ARGV[2] cron id ('@' + schedule id)    ARGV[3] definition JSON
-- ARGV[4] its next tick (ms)  ARGV[5] workflow    ARGV[6] '1' when the caller has the workflow's definition
-- Returns { 'created' | 'replaced' | 'unchanged', next tick (none while paused) } | { 'unknown' } | { 'dynamic' }
--!include writable.lua
--!include keys.lua
--!include cron.lua

local base, id, def, workflow = ARGV[1], ARGV[2], ARGV[3], ARGV[5]
assert_writable(base)
if not is_runtime_cron(id) then return redis.error_reply('ERR schedule ids start with @') end
if ARGV[6] ~= '1' then
  local meta = redis.call('HMGET', k_meta(base, workflow), 'queue', 'fdynamic')
  if not meta[1] then return { 'unknown' } end
  if meta[2] == '1' then return { 'dynamic' } end
end
local existed = redis.call('HEXISTS', KEYS[1], id) == 1
local next, changed = put_cron(base, KEYS[1], KEYS[2], id, def, ARGV[4])
if not changed then return { 'unchanged', next } end
return { existed and 'replaced' or 'created', next }
