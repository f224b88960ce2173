-- rotate-payload: replaces one stored value by its re-encoded text (`rotatePayloads`, `redflow
-- payloads rotate`), only while it is still the text that was read: a value a worker or a client
-- rewrote meanwhile is left alone (its writer sealed it with its own codec) and looked at again by
-- the next pass.
-- KEYS[1] the key holding the value
-- ARGV: base type field old new
-- ARGV[1] base "{prefix}:"    ARGV[2] 'hash', 'string' or 'list'
-- ARGV[3] the hash field, or the list index ('' for a string)
-- ARGV[4] the text that was read                   ARGV[5] its re-encoded text
-- Returns 1 when replaced, 0 when the value changed (or went) meanwhile
--!include writable.lua

local kind, field, old, new = ARGV[2], ARGV[3], ARGV[4], ARGV[5]
assert_writable(ARGV[1])
if kind == 'hash' then
  if redis.call('HGET', KEYS[1], field) ~= old then return 0 end
  redis.call('HSET', KEYS[1], field, new)
elseif kind == 'string' then
  if redis.call('GET', KEYS[1]) ~= old then return 0 end
  redis.call('SET', KEYS[1], new, 'KEEPTTL')
else
  local index = tonumber(field)
  if redis.call('LINDEX', KEYS[1], index) ~= old then return 0 end
  redis.call('LSET', KEYS[1], index, new)
end
return 1
