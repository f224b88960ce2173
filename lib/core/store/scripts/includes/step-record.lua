-- step-record.lua: the step records scripts write; the Lua twin of store/step-record.ts, which
-- documents the format. A step record is the run-hash field "s:<step name>", a JSON array.

-- A step done by a script at `finishedAt`: [1, seq, attempt, finishedAt, durationMs, output] when
-- `ok`, [0, seq, attempt, finishedAt, durationMs, error] otherwise. `durationMs` (default 0: it
-- took no time) is how long its wait lasted. `payload` is JSON text; '' leaves the output out
-- (undefined). `via` (optional) names the wait that ended, as the JSON text of the head of the
-- record's last element: '"s","<signal>"', '"e","<event>"' or '"c","<child run id>"'; the record
-- then always has 7 elements, the output `null` and the last element [..., 0] when it was undefined.
local function step_done(ok, seq, attempt, finishedAt, payload, durationMs, via)
  local head = '[' .. (ok and 1 or 0) .. ',' .. seq .. ',' .. attempt .. ',' .. finishedAt .. ',' .. (durationMs or 0)
  if via then
    if payload == '' then return head .. ',null,[' .. via .. ',0]]' end
    return head .. ',' .. payload .. ',[' .. via .. ']]'
  end
  if payload == '' then return head .. ']' end
  return head .. ',' .. payload .. ']'
end

-- A step waiting for child run `childId` until `deadline` (ms, 0 = no deadline), since `began` (ms).
local function step_waiting_child(seq, attempt, childId, deadline, began)
  return '[3,' .. seq .. ',' .. attempt .. ',' .. cjson.encode(childId) .. ',' .. deadline .. ',' .. began .. ']'
end

-- A step waiting for signal `name` until `deadline` (ms, 0 = no deadline), since `began` (ms).
local function step_waiting_signal(seq, attempt, name, deadline, began)
  return '[4,' .. seq .. ',' .. attempt .. ',' .. cjson.encode(name) .. ',' .. deadline .. ',' .. began .. ']'
end

-- A step waiting for event `event` whose payload matches `matchJson` (an object's JSON text) until
-- `deadline` (ms, 0 = no deadline), since `began` (ms).
local function step_waiting_event(seq, attempt, event, deadline, matchJson, began)
  return '[5,' .. seq .. ',' .. attempt .. ',' .. cjson.encode(event) .. ',' .. deadline .. ',' .. matchJson .. ',' .. began .. ']'
end

-- The positions (1-based) of the deadline and of the start time of each waiting record: [3, seq,
-- attempt, childId, deadline, began], [4, ..., name, deadline, began], [5, ..., event, deadline,
-- match, began], [6, seq, attempt, deadline, began]. `began` is missing from records written
-- before it was kept.
local WAIT_FIELDS = { ['[3'] = { 5, 6 }, ['[4'] = { 5, 6 }, ['[5'] = { 5, 7 }, ['[6'] = { 4, 5 } }

-- The deadline and the start time (ms) of a waiting record, each 0 when it has none (or the record
-- is not one). Decoded in a protected call: a damaged record cannot raise an error after the
-- script has written.
local function wait_times(record)
  local at = WAIT_FIELDS[string.sub(record, 1, 2)]
  if not at then return 0, 0 end
  local ok, decoded = pcall(cjson.decode, record)
  if not ok or type(decoded) ~= 'table' then return 0, 0 end
  local deadline, began = decoded[at[1]], decoded[at[2]]
  return type(deadline) == 'number' and deadline or 0, type(began) == 'number' and began or 0
end

-- How long a wait lasted when it ends at `now`: from its record's start time, 0 when unknown.
local function wait_duration(record, now)
  local _, began = wait_times(record)
  if began <= 0 then return 0 end
  return string.format('%.0f', math.max(0, tonumber(now) - began))
end

-- True for the record of a step still waiting for something else to happen: a child run ([3),
-- a signal ([4), an event ([5) or the first of several branches (step.waitForAny, [6).
local function is_waiting(record)
  if record == nil or record == false then return false end
  local head = string.sub(record, 1, 2)
  return head == '[3' or head == '[4' or head == '[5' or head == '[6'
end

-- True for the record of a step still waiting for an event.
local function is_event_wait(record)
  return record ~= nil and record ~= false and string.sub(record, 1, 2) == '[5'
end

-- True for the record of a step still waiting for a signal.
local function is_signal_wait(record)
  return record ~= nil and record ~= false and string.sub(record, 1, 2) == '[4'
end

-- True for the record of a step still waiting for a child run.
local function is_child_wait(record)
  return record ~= nil and record ~= false and string.sub(record, 1, 2) == '[3'
end

-- The child run id of the record of a step still waiting for a child run ([3, seq, attempt,
-- "<id>", deadline]), else nil. Decoded in a protected call: a damaged record cannot raise an
-- error after the script has written.
local function child_wait_id(record)
  if not is_child_wait(record) then return nil end
  local ok, decoded = pcall(cjson.decode, record)
  if ok and type(decoded) == 'table' and type(decoded[4]) == 'string' then return decoded[4] end
  return nil
end

-- What the waiting record `record` waits for, as the run's `wait` field names it: 'child', 'signal',
-- 'event' or 'any' (a race), and the child run's id, the signal's or the event's name ('' for a
-- race); nil when it is not a waiting record. Decoded in a protected call: a damaged record
-- cannot raise an error after the script has written (its name is then '').
local function waiting_target(record)
  local head = string.sub(record, 1, 2)
  local kind = ({ ['[3'] = 'child', ['[4'] = 'signal', ['[5'] = 'event', ['[6'] = 'any' })[head]
  if not kind or kind == 'any' then return kind, '' end
  local ok, decoded = pcall(cjson.decode, record)
  if ok and type(decoded) == 'table' and type(decoded[4]) == 'string' then return kind, decoded[4] end
  return kind, ''
end

-- True for the record of a step.waitForAny whose race no branch has won yet: [6, seq, attempt,
-- deadline]. Its branches are in the run-hash field race_field(step field).
local function is_race_wait(record)
  return record ~= nil and record ~= false and string.sub(record, 1, 2) == '[6'
end

-- The run-hash field holding the branches of the race of step field "s:<name>": "r:<name>", a JSON
-- array of [key, 's', signal name], [key, 't', due ms], [key, 'c', child run id, 'cancel' |
-- 'abandon'] and [key, 'e', event, match shape, match hash]. It stays until the lease holder has
-- unregistered the branches (wait-any-2.lua).
local function race_field(field)
  return 'r:' .. string.sub(field, 3)
end

-- The branches of a race, decoded from the JSON of its branches field: a list of { key, 's', name },
-- { key, 't', due }, { key, 'c', child id, onLose } and { key, 'e', event, shape, hash }; nil when
-- it is missing or damaged. Decoded in a protected call: a damaged field cannot raise an error
-- after the script has written.
local function race_branches(json)
  if not json then return nil end
  local ok, branches = pcall(cjson.decode, json)
  if not ok or type(branches) ~= 'table' then return nil end
  for _, branch in ipairs(branches) do
    if type(branch) ~= 'table' or type(branch[1]) ~= 'string' or type(branch[3]) ~= (branch[2] == 't' and 'number' or 'string') then return nil end
    if branch[2] == 'e' and (type(branch[4]) ~= 'string' or type(branch[5]) ~= 'string') then return nil end
  end
  return branches
end

-- The key of the race branch of `kind` ('s' or 'c') waiting for `id` (a signal name or a child run
-- id) in the branches JSON `json`, or nil.
local function race_branch_key(json, kind, id)
  for _, branch in ipairs(race_branches(json) or {}) do
    if branch[2] == kind and branch[3] == id then return branch[1] end
  end
  return nil
end

-- The record of a race that branch `key` won: [1, ..., { key, value }] with the branch's payload
-- (JSON text; '' is null), or, for a child that failed or was canceled, [0, ..., error]. nil for a
-- damaged race record.
local function race_won(waiting, key, ok, payload, now)
  local seq, attempt = string.match(waiting, '^%[6,(%d+),(%d+),')
  if not seq then return nil end
  local duration = wait_duration(waiting, now)
  if not ok then return step_done(false, seq, attempt, now, payload, duration) end
  if payload == '' then payload = 'null' end
  return step_done(true, seq, attempt, now, '{"key":' .. cjson.encode(key) .. ',"value":' .. payload .. '}', duration)
end

-- The record that replaces a waiting record once what it waited for happened (the child ended,
-- the signal came, or the wait timed out), naming what it waited for (step_done's `via`). Parsed with a pattern, not
-- cjson, so a damaged record cannot raise an error after this script has written: it returns nil
-- and the record is left for the run's replay to report as corrupt.
local function resolved_record(waiting, ok, payload, now)
  local seq, attempt = string.match(waiting, '^%[[345],(%d+),(%d+),')
  if not seq then return nil end
  local kind, name = waiting_target(waiting)
  local via = '"' .. string.sub(kind, 1, 1) .. '",' .. cjson.encode(name)
  return step_done(ok, seq, attempt, now, payload, wait_duration(waiting, now), via)
end

-- The deadline (ms) of a waiting record ([3, [4, [5 or [6), 0 when it has none or is not one.
local function record_deadline(record)
  local deadline = wait_times(record)
  return deadline
end

-- A finished step record ([1 or [0): '1' when it succeeded, '0' when it threw, then its attempt
-- and its finish time, as text; nil for a record of any other kind.
local function finished_step(record)
  return string.match(record, '^%[([01]),%d+,(%d+),(%d+),')
end

-- The error message of a failed step record ([0 ...]), or nil. Decoded in a protected call: a
-- damaged record cannot raise an error after the script has written.
local function failed_step_message(record)
  local ok, decoded = pcall(cjson.decode, record)
  if ok and type(decoded) == 'table' and type(decoded[6]) == 'table' and type(decoded[6].message) == 'string' then
    return decoded[6].message
  end
  return nil
end

-- A tries record "t:<step name>" = [failures, runAttempt, failuresInRunAttempt, retryAt,
-- lastError, tries?] (store/step-record.ts): its run attempt and retryAt as text, and its last
-- error's message; nil when it is not one. Decoded in a protected call: a damaged record cannot
-- raise an error after the script has written.
local function tries_retry(record)
  local ok, r = pcall(cjson.decode, record)
  if not ok or type(r) ~= 'table' or type(r[2]) ~= 'number' or type(r[4]) ~= 'number' then return nil end
  local message = type(r[5]) == 'table' and type(r[5].message) == 'string' and r[5].message or nil
  return string.format('%.0f', r[2]), string.format('%.0f', r[4]), message
end
