-- queue-pause: pauses a queue (workers claim none of its runs, and of its versions' lists, until
-- it is resumed; running runs go on, new runs queue) or resumes it. The pause is kept in Redis, so
-- it holds across restarts and for every worker of the prefix.
-- KEYS[1] paused queues hash
-- ARGV: base queue paused
-- ARGV[1] base "{prefix}:"    ARGV[2] queue name
-- ARGV[3] the pause's JSON ({ note?, at }), or '' to resume
-- Returns 1 when the queue's state changed, 0 when it was already so
--!include writable.lua

local queue, paused = ARGV[2], ARGV[3]
assert_writable(ARGV[1])
if paused ~= '' then
  if redis.call('HEXISTS', KEYS[1], queue) == 1 then return 0 end
  redis.call('HSET', KEYS[1], queue, paused)
  return 1
end
return redis.call('HDEL', KEYS[1], queue)
