-- writable.lua: the refusal of a full or read-only Redis, before a script writes.
--!include keys.lua

-- Called first by every script that may grow memory. Redis refuses a script's first
-- memory-growing write when it is over maxmemory (OOM), a replica (READONLY) or cannot persist
-- (MISCONF), but lets every later write of that script through. A script whose first write is
-- an LPOP or a ZREM would therefore get half-way on a full Redis. This no-op write (SET XX of a
-- key that never exists) makes the refusal happen here, before anything has changed.
-- As a Redis Function (the library, REFUSED_BEFORE_RUN), Redis refuses the whole call before it
-- runs instead, so the check costs nothing there.
local function assert_writable(base)
  if REFUSED_BEFORE_RUN then return end
  redis.call('SET', k_write_check(base), '1', 'XX')
end
