-- wait-any: step.waitForAny, for the lease holder of a running run: the one place a race is
-- decided by the worker and the one place it ends. A race record is [6, seq, attempt, deadline] in
-- the step field, and its branches are in race_field(field) (includes/step-record.lua). In order:
--   * the step has a finished record ([1 or [0, the race was won while the run waited: a signal in
--     signal-2.lua, a child's end in notify_waiters, an event in deliver_event) or a branch is ready now (the oldest buffered
--     signal of a branch's name, taken from the buffer; a child that already ended; else the
--     earliest timer that is due; events are not kept, so none is ready): that is the winner. Every
--     branch is then unregistered (its `sigwait:<name>`, its `waiters:<child>` entry, its event wait), each losing child that has not ended is
--     canceled ('cancel') or left running outside the parent's children ('abandon'), and the
--     branches field is deleted. Reply 'done' with the step record.
--   * else the race record and its branches are stored (from ARGV[6], ARGV[7] the first time) and
--     registered: `sigwait:<name>` for each signal, the parent in `waiters:<child>` for each child,
--     '<step field>|<key>' in the event waits (event-waits.lua) for each event (deliver_event).
--     Reply 'wait'; the caller suspends the run until a branch wins or the deadline passes.
-- KEYS[1] run hash            KEYS[2] signals list of the run
-- ARGV: base runId token field now raceRecord raceBranches
-- ARGV[1] base "{prefix}:"    ARGV[2] run id      ARGV[3] lease token   ARGV[4] step field
-- ARGV[5] now (ms)
-- ARGV[6] the race record to store ([6, ...]) when the step has none yet, else ''
-- ARGV[7] its branches JSON (when ARGV[6] is set)
-- Returns { 'lost' } | { 'corrupt' } | { 'done', step record } | { 'wait', race record }
--!include writable.lua
--!include lease.lua
--!include keys.lua
--!include status.lua
--!include step-record.lua
--!include step-wait.lua
--!include cancel.lua
--!include event-waits.lua
--!include child-wait.lua

local base, runId, token, field, now = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
assert_writable(base)
if not leased_run(KEYS[1], token, RUNNING) then return { 'lost' } end
local branchesField = race_field(field)
local stored = redis.call('HMGET', KEYS[1], field, branchesField)
local record, branchesJson = stored[1], stored[2]
if not record then
  if ARGV[6] == '' then return { 'corrupt' } end
  record, branchesJson = ARGV[6], ARGV[7]
end
-- Finished and unregistered already: a retried call whose first reply was lost.
if not branchesJson then return { 'done', record } end
local branches = race_branches(branchesJson)
if not branches then return { 'corrupt' } end

if is_race_wait(record) then
  local key, won, payload
  local signals = {}
  for _, branch in ipairs(branches) do
    if branch[2] == 's' then signals[branch[3]] = branch[1] end
  end
  if next(signals) then
    key, payload = take_signal(KEYS[2], signals)
    if key then won = true end
  end
  if not key then
    for _, branch in ipairs(branches) do
      if branch[2] == 'c' then
        local child = redis.call('HMGET', k_run(base, branch[3]), 'status', 'output', 'error')
        if child[1] == 'succeeded' then
          key, won, payload = branch[1], true, child[2] or ''
          break
        elseif child[1] and TERMINAL[child[1]] then
          key, won, payload = branch[1], false, child[3] or '{}'
          break
        end
      end
    end
  end
  if not key then
    local due
    for _, branch in ipairs(branches) do
      if branch[2] == 't' and branch[3] <= tonumber(now) and (not due or branch[3] < due) then key, due = branch[1], branch[3] end
    end
    won, payload = true, 'null'
  end
  if not key then
    redis.call('HSET', KEYS[1], field, record, branchesField, branchesJson)
    for _, branch in ipairs(branches) do
      if branch[2] == 's' then
        redis.call('HSET', KEYS[1], 'sigwait:' .. branch[3], field)
      elseif branch[2] == 'c' then
        add_child_waiter(base, branch[3], runId, field)
      elseif branch[2] == 'e' then
        register_event_wait(base, runId, branch[3], branch[4], branch[5], field .. '|' .. branch[1])
      end
    end
    return { 'wait', record }
  end
  record = race_won(record, key, won, payload, now)
  if not record then return { 'corrupt' } end
end

-- The race is over: no branch may win it again.
for _, branch in ipairs(branches) do
  if branch[2] == 's' then
    if redis.call('HGET', KEYS[1], 'sigwait:' .. branch[3]) == field then redis.call('HDEL', KEYS[1], 'sigwait:' .. branch[3]) end
  elseif branch[2] == 'e' then
    unregister_event_wait(base, runId, branch[3], branch[4], branch[5], field .. '|' .. branch[1])
  elseif branch[2] == 'c' then
    local childId = branch[3]
    redis.call('SREM', k_waiters(base, childId), runId .. '|' .. field)
    local status = redis.call('HGET', k_run(base, childId), 'status')
    if status and not TERMINAL[status] then
      if branch[4] == 'abandon' then
        redis.call('SREM', k_children(base, runId), childId)
      else
        local message = 'Run "' .. childId .. '" was canceled because it lost the race of step "' .. string.sub(field, 3) .. '" of run "' .. runId .. '".'
        cancel_run(base, childId, now, cjson.encode({ name = 'CanceledError', message = message }), 'lost the race', false)
      end
    end
  end
end
redis.call('HSET', KEYS[1], field, record)
redis.call('HDEL', KEYS[1], branchesField)
return { 'done', record }
