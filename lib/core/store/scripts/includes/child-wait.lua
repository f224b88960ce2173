-- child-wait.lua: a parent's step waiting on a child run (step.runWorkflow, or a child branch of
-- step.waitForAny). The child's end hands its result to its waiters (waiters.lua, notify_waiters).
--!include keys.lua
--!include status.lua
--!include step-record.lua

-- Registers the parent's step field as a waiter of the child, so the child's end writes into it.
local function add_child_waiter(base, childId, parentId, field)
  redis.call('SADD', k_waiters(base, childId), parentId .. '|' .. field)
  redis.call('HSET', k_run(base, childId), 'waited', '1')
end

-- The record of a step waiting on child run `childId` (`waiting`, a [3 record), as the child stands
-- now: its result or error when it has ended (any end status, as notify_waiters hands over); else
-- `waiting` itself, the parent registered as its waiter; or a failed record (RunNotFoundError) when
-- the child no longer exists, so the step runs again, starting the child anew.
local function wait_on_child(base, parentId, field, childId, waiting, now)
  local child = redis.call('HMGET', k_run(base, childId), 'status', 'output', 'error')
  if child[1] == 'succeeded' then return resolved_record(waiting, true, child[2] or '', now) end
  if child[1] and TERMINAL[child[1]] then return resolved_record(waiting, false, child[3] or '{}', now) end
  if child[1] then
    add_child_waiter(base, childId, parentId, field)
    return waiting
  end
  return resolved_record(waiting, false, cjson.encode({ name = 'RunNotFoundError', fields = { runId = childId },
    message = 'Run "' .. childId .. '" does not exist: the child run that run "' .. parentId .. '" waited on was deleted; ' ..
      'its step runs again, starting the child anew.' }), now)
end
