-- claim: starts the next queued run of a queue under a new lease and returns it with its step
-- records, so the worker needs no second read.
-- KEYS[1] queue ready list    KEYS[2] leases zset
-- ARGV: base token now leaseUntil ...skip
-- ARGV[1] base "{prefix}:"    ARGV[2] lease token (unique per claim)   ARGV[3] now (ms)   ARGV[4] lease expiry (ms, real time)
-- ARGV[5..] workflows whose queued runs are left in the list (the worker has them at another version)
-- Returns { runId, flat run hash }, or nil when the queue is empty, or { '', workflow } when it
-- holds only runs left for another version, or { '', '', 'paused' } when the queue is paused. The hash holds the traceparent (and tracestate) stored
-- at enqueue, so the worker traces the attempt without another read.
--!include writable.lua
--!include claim.lua

assert_writable(ARGV[1])
local skip
for i = 5, #ARGV do
  skip = skip or {}
  skip[ARGV[i]] = true
end
return claim_next(ARGV[1], KEYS[1], KEYS[2], ARGV[2], ARGV[3], ARGV[4], skip)
