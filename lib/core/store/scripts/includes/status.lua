-- status.lua: the run statuses.

local TERMINAL = { succeeded = true, failed = true, canceled = true, compensation_failed = true, terminated = true }
local STATUSES = { 'scheduled', 'queued', 'running', 'compensating', 'succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated' }
-- Statuses in which a worker may hold the run's lease: running its handler, or running the
-- compensations of a run that failed or was canceled (saga).
local HELD = { running = true, compensating = true }
