-- presence: a worker says which version of each of its workflows it serves, until `expiry`
-- (real time, renewed every heartbeat), or, with expiry 0, that it stops serving them. Entries of
-- other workers that expired are dropped on the way. The version's own field keeps the last time
-- any worker served it, so a version whose workers are all gone is still listed. It also keeps
-- the worker's entry in the workers hash (`info`, JSON with `expiresAt`), deleted with expiry 0;
-- entries whose `expiresAt` passed (or that are not JSON) are dropped on the way.
-- KEYS[1] workflows set (the prefix's slot)
-- ARGV: base now expiry workerId info ...versions
-- ARGV[1] base "{prefix}:"    ARGV[2] now (ms, real time)    ARGV[3] expiry (ms, real time), '0' to remove
-- ARGV[4] worker id           ARGV[5] the worker's info JSON ('' with expiry 0)
-- ARGV[6..] pairs of workflow name, version
-- Returns nothing.
--!include writable.lua
--!include keys.lua

local base, now, expiry, worker = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
assert_writable(base)
for i = 6, #ARGV, 2 do
  local key = k_workflow_versions(base, ARGV[i])
  local version = ARGV[i + 1]
  if expiry == '0' then
    redis.call('HDEL', key, version .. '\n' .. worker)
  else
    redis.call('HSET', key, version .. '\n' .. worker, expiry, version, ARGV[2])
  end
  local entries = redis.call('HGETALL', key)
  for j = 1, #entries, 2 do
    if string.find(entries[j], '\n', 1, true) and tonumber(entries[j + 1]) < now then redis.call('HDEL', key, entries[j]) end
  end
end
local workers = k_workers(base)
if expiry == '0' then
  redis.call('HDEL', workers, worker)
else
  redis.call('HSET', workers, worker, ARGV[5])
end
local entries = redis.call('HGETALL', workers)
for j = 1, #entries, 2 do
  local ok, info = pcall(cjson.decode, entries[j + 1])
  if not ok or type(info) ~= 'table' or (tonumber(info.expiresAt) or 0) < now then redis.call('HDEL', workers, entries[j]) end
end
return nil
