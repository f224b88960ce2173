-- events-max-len.lua: put first in every script by the loader (script-loader.ts), before any
-- include. Every script call ends its ARGV with the event stream's MAXLEN (0 = the stream is off);
-- it is taken off ARGV here, so each script reads its own ARGV (varargs included) unchanged.
local EVENTS_MAX_LEN_ARG = table.remove(ARGV)
local EVENTS_MAX_LEN = tonumber(EVENTS_MAX_LEN_ARG) or 0
-- A script sent with EVALSHA is not refused before it runs: assert_writable (writable.lua) checks.
local REFUSED_BEFORE_RUN = false
