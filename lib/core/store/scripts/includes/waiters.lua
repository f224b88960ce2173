-- waiters.lua: handing an ended child's result to the parents waiting on it.
--!include keys.lua
--!include status.lua
--!include step-record.lua
--!include wake.lua

-- A run ended: hand its result to every parent waiting on it (step.runWorkflow, or a branch of
-- step.waitForAny), and wake those
-- parents that are suspended. Callers check the run's `waited` field first (set by start-child),
-- so runs nobody waits on pay nothing here.
local function notify_waiters(base, runId, ok, payload, now)
  local waitersKey = k_waiters(base, runId)
  for _, waiter in ipairs(redis.call('SMEMBERS', waitersKey)) do
    local sep = string.find(waiter, '|', 1, true)
    local parentId, field = string.sub(waiter, 1, sep - 1), string.sub(waiter, sep + 1)
    local parentKey = k_run(base, parentId)
    local parent = redis.call('HMGET', parentKey, 'status', 'queue', 'createdAt', 'workflow')
    if parent[1] and not TERMINAL[parent[1]] then
      local waiting = redis.call('HGET', parentKey, field)
      if is_child_wait(waiting) then
        resolve_wait(base, parentId, parent, field, resolved_record(waiting, ok, payload, now))
      elseif is_race_wait(waiting) then
        -- A branch of step.waitForAny: this child wins the race (the parent's worker unregisters the
        -- other branches and cancels or abandons the losing children).
        local key = race_branch_key(redis.call('HGET', parentKey, race_field(field)), 'c', runId)
        local record = key and race_won(waiting, key, ok, payload, now)
        if record then resolve_wait(base, parentId, parent, field, record) end
      end
    end
  end
  redis.call('DEL', waitersKey)
end
