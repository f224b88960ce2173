-- status.lua: the run statuses.

local TERMINAL = { succeeded = true, failed = true, canceled = true, terminated = true }
local STATUSES = { 'scheduled', 'queued', 'running', 'succeeded', 'failed', 'canceled', 'terminated' }
