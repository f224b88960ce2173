-- keys.lua: every key shape a script builds, as in keys.ts. `base` is "{prefix}:", so each key
-- stays in the prefix's hash tag.

local function k_run(base, id) return base .. 'run:' .. id end
local function k_ready(base, queue) return base .. 'q:' .. queue .. ':ready' end
-- Priority runs of a queue (ready.lua), and the last score given per '<level>|<queue>'.
local function k_priority(base, queue) return base .. 'q:' .. queue .. ':prio' end
local function k_priority_last(base) return base .. 'prio-last' end
-- Runs of a concurrency key waiting for their turn ('<workflow>|<key>' ends the key), the key's
-- running runs (zset, score: start ms), and where each key's place is (ready.lua).
local function k_group_runs(base, group) return base .. 'grp:' .. group end
local function k_group_active(base, group) return base .. 'grp-active:' .. group end
local function k_groups(base) return base .. 'groups' end
-- Events waiting in a batch of '<workflow>|<key>' (their payload JSON, oldest first), when each
-- batch is due (score: its first event's time + timeout), and each batch's first event id.
local function k_batch(base, group) return base .. 'batch:' .. group end
local function k_batches_due(base) return base .. 'batches:due' end
local function k_batch_first(base) return base .. 'batch-first' end
local function k_scheduled(base, queue) return base .. 'q:' .. queue .. ':scheduled' end
local function k_status(base, status) return base .. 'status:' .. status end
local function k_meta(base, workflow) return base .. 'workflow:' .. workflow end
local function k_active(base, workflow) return base .. 'wf:' .. workflow .. ':active' end
local function k_parked(base, workflow) return base .. 'wf:' .. workflow .. ':parked' end
local function k_mutex(base, key) return base .. 'mutex:' .. key end
-- User-chosen parts (run ids, mutex keys) always end a key, and each kind of key has its own
-- fixed first segment: a mutex named "m:parked" can never be the parked list of mutex "m".
local function k_mutex_parked(base, key) return base .. 'mutex-parked:' .. key end
local function k_children(base, runId) return base .. 'children:' .. runId end
local function k_waiters(base, runId) return base .. 'waiters:' .. runId end
-- Versions of a workflow workers serve: '<version>' -> last seen (ms), '<version>\n<worker id>' -> expiry (ms).
local function k_workflow_versions(base, workflow) return base .. 'wfversions:' .. workflow end
-- The live workers: worker id -> JSON of its host, pid, queues, versions, ... and `expiresAt` (ms).
local function k_workers(base) return base .. 'workers' end
-- Runs of a workflow, as engines before script version 7 kept them (read by the index backfill only).
local function k_workflow_runs(base, workflow) return base .. 'wf:' .. workflow .. ':runs' end
-- Names of the workflows that have (or had) runs, registered or not.
local function k_workflow_names(base) return base .. 'wfnames' end
-- Runs of a workflow in a status. The status is one of the status words, without ':', and the workflow
-- name ends the key, so 'wfstatus:<status>:<workflow>' splits one way only: a workflow named
-- 'a:b' in status 'failed' is 'wfstatus:failed:a:b', which no other (status, workflow) pair builds.
local function k_workflow_status(base, status, workflow) return base .. 'wfstatus:' .. status .. ':' .. workflow end
local function k_idempotency(base, workflow, key) return base .. 'idem:' .. workflow .. '|' .. key end
local function k_event_subs(base, event) return base .. 'event:' .. event .. ':subs' end
local function k_event_data(base, eventId) return base .. 'evdata:' .. eventId end
local function k_debounce(base, workflow, key) return base .. 'debounce:' .. workflow .. '|' .. key end
local function k_throttle(base, key) return base .. 'throttle:' .. key end
local function k_ratelimit(base, key) return base .. 'ratelimit:' .. key end
local function k_event_idempotency(base, event, key) return base .. 'idem-event:' .. event .. '|' .. key end
local function k_events_due(base) return base .. 'events:due' end
local function k_write_check(base) return base .. 'write-check' end
-- Signals sent to a run and not consumed yet, oldest first: "<signal name>\n<payload JSON>".
local function k_signals(base, runId) return base .. 'signals:' .. runId end
-- Runs waiting for an event with given match values: '<run id>\n<step field>' (step.waitForEvent)
-- or '<run id>\n' (cancelOn). `hash` is the sha1 of the match (fixed length), the event name ends the key.
local function k_event_wait(base, event, hash) return base .. 'evwait:' .. hash .. '|' .. event end
-- Match shapes waited on for an event: shape (sorted field names, tab-separated) -> count of waits.
local function k_event_shapes(base, event) return base .. 'evshapes:' .. event end
-- A run's event-wait registrations, to drop when the run ends: '<field>\n<hash>\n<event>\n<shape>'.
local function k_event_waits_of(base, runId) return base .. 'evwaits:' .. runId end
-- Scheduled runs waiting in a step, by what they wait for (score: creation ms): 'waiting:<kind>'
-- for every kind (sleep, signal, event, child, any), 'waiting:<kind>:<name>' for a signal's or an
-- event's name. The kind is a fixed word without ':', and the name ends the key.
local function k_waiting(base, kind) return base .. 'waiting:' .. kind end
local function k_waiting_for(base, kind, name) return base .. 'waiting:' .. kind .. ':' .. name end
local function k_leases(base) return base .. 'leases' end
-- Leases of compensating runs a worker holds: apart, so `leases` lists only running runs.
local function k_comp_leases(base) return base .. 'comp-leases' end
-- Pub/sub channel of running runs just canceled.
local function k_cancel_channel(base) return base .. 'cancel' end
-- Pub/sub channel of ended runs: "<id>\n<status>[\n<output JSON | error JSON | cancel reason>]".
local function k_ended_channel(base) return base .. 'ended' end
-- The run event stream (XADD by run-events.lua, read by client.events()).
local function k_events(base) return base .. 'events' end
local function k_cron_defs(base) return base .. 'cron:defs' end
-- Cron id -> the run its latest tick started / the tick buffered by overlap 'buffer-one' / a pause's JSON.
local function k_cron_last(base) return base .. 'cron:last' end
local function k_cron_buffered(base) return base .. 'cron:buffered' end
local function k_cron_paused(base) return base .. 'cron:paused' end
-- Queue name → the JSON { note?, at } of a paused queue: no run of it is claimed.
local function k_queues_paused(base) return base .. 'queues:paused' end
-- Cron id -> how many runs its ticks started (for its `limit`).
local function k_cron_count(base) return base .. 'cron:count' end
