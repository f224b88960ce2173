-- register-cancel-on: registers a run's cancelOn triggers (event and match, from its input) when
-- its first attempt starts, so that a matching emit cancels it (fan-out.lua). Marks the run with
-- `cancelOn` so later attempts skip this call. The registrations go when the run ends (end_run).
-- KEYS[1] run hash
-- ARGV: base runId token ...triggers
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token
-- ARGV[4..] triples of event name, match shape, match hash
-- Returns 'ok' | 'lost'
--!include writable.lua
--!include lease.lua
--!include keys.lua
--!include event-waits.lua

local base, runId = ARGV[1], ARGV[2]
assert_writable(base)
if not leased_run(KEYS[1], ARGV[3], RUNNING) then return 'lost' end
for i = 4, #ARGV, 3 do
  register_event_wait(base, runId, ARGV[i], ARGV[i + 1], ARGV[i + 2], '')
end
redis.call('HSET', KEYS[1], 'cancelOn', '1')
return 'ok'
