/**
 * Every Redis key of a prefix is built here. All keys share the hash tag `{prefix}`, so each script
 * touches one Redis Cluster slot. Scripts build dynamic keys with the same shapes in `scripts/includes/keys.lua`.
 */
export class RedflowKeys {
  /** `{prefix}:` — the start of every key; scripts receive it to build dynamic keys inside the tag. */
  readonly base: string;

  constructor(readonly prefix: string) {
    this.base = `{${prefix}}:`;
  }

  run(id: string): string {
    return `${this.base}run:${id}`;
  }
  /** Child runs a parent waits on. Each kind of key has its own first segment, so ids never collide with it. */
  children(runId: string): string {
    return `${this.base}children:${runId}`;
  }
  ready(queue: string): string {
    return `${this.base}q:${queue}:ready`;
  }
  /** Priority runs of a queue, by ready time shifted by their priority (ready.lua). */
  priority(queue: string): string {
    return `${this.base}q:${queue}:prio`;
  }
  /** The last priority score given per "<level>|<queue>" (FIFO within a priority). */
  priorityLast(): string {
    return `${this.base}prio-last`;
  }
  /** Runs of concurrency key `group` ("<workflow>|<key>") waiting for their turn. */
  groupRuns(group: string): string {
    return `${this.base}grp:${group}`;
  }
  /** Running runs of concurrency key `group` (score: start ms). */
  groupActive(group: string): string {
    return `${this.base}grp-active:${group}`;
  }
  /** Where each concurrency key's place is: group → "r|<queue>" (in its ready list) or "p|<queue>" (at its limit). */
  groups(): string {
    return `${this.base}groups`;
  }
  /** Payloads of the events waiting in batch `group` ("<workflow>|<key>"), oldest first. */
  batch(group: string): string {
    return `${this.base}batch:${group}`;
  }
  /** Batches by due time (their first event's time + timeout). */
  batchesDue(): string {
    return `${this.base}batches:due`;
  }
  /** Each batch's first event id (its run is "<first event id>.<workflow>"). */
  batchFirst(): string {
    return `${this.base}batch-first`;
  }
  scheduled(queue: string): string {
    return `${this.base}q:${queue}:scheduled`;
  }
  /** Runs of a workflow holding a concurrency slot. */
  active(workflow: string): string {
    return `${this.base}wf:${workflow}:active`;
  }
  /** Runs of a workflow waiting for a concurrency slot. */
  parked(workflow: string): string {
    return `${this.base}wf:${workflow}:parked`;
  }
  /** The run holding mutex `key`. */
  mutex(key: string): string {
    return `${this.base}mutex:${key}`;
  }
  /** Runs waiting for mutex `key`; its own first segment, so a mutex named "m:parked" is not this list of "m". */
  mutexParked(key: string): string {
    return `${this.base}mutex-parked:${key}`;
  }
  /** Parents waiting for a run to end ("<parent id>|<step field>"). */
  waiters(runId: string): string {
    return `${this.base}waiters:${runId}`;
  }
  /** An event stored until its emitAt. */
  eventData(eventId: string): string {
    return `${this.base}evdata:${eventId}`;
  }
  /** Starts of runs with throttle key `key` in the current window. */
  throttle(key: string): string {
    return `${this.base}throttle:${key}`;
  }
  /** Starts of runs with rate-limit key `key` in the current window. */
  rateLimit(key: string): string {
    return `${this.base}ratelimit:${key}`;
  }
  /** The event id an `emitEvent` idempotency key stands for. */
  eventIdempotency(event: string, key: string): string {
    return `${this.base}idem-event:${event}|${key}`;
  }
  /** Never exists: scripts write it with SET XX first, so a full Redis refuses them before any change. */
  writeCheck(): string {
    return `${this.base}write-check`;
  }
  /** Signals sent to a run and not consumed yet, oldest first ("<name>\n<payload JSON>"). */
  signals(runId: string): string {
    return `${this.base}signals:${runId}`;
  }
  /** Runs waiting for an event with one set of match values (`hash`: sha1 of the match). */
  eventWait(event: string, hash: string): string {
    return `${this.base}evwait:${hash}|${event}`;
  }
  /** Match shapes waited on for an event: shape → number of waits. */
  eventShapes(event: string): string {
    return `${this.base}evshapes:${event}`;
  }
  /** A run's event-wait registrations (step waits and cancelOn), dropped when it ends. */
  eventWaitsOf(runId: string): string {
    return `${this.base}evwaits:${runId}`;
  }
  leases(): string {
    return `${this.base}leases`;
  }
  /** Leases of compensating runs a worker holds (score = expiry ms): apart, so `leases` lists only running runs. */
  compensationLeases(): string {
    return `${this.base}comp-leases`;
  }
  /** Runs that ended in `status` (succeeded, failed, canceled, compensation_failed, terminated), scored by finish time. */
  status(status: string): string {
    return `${this.base}status:${status}`;
  }
  /** A workflow's runs as engines before script version 7 kept them: read by the index backfill only. */
  workflowRuns(workflow: string): string {
    return `${this.base}wf:${workflow}:runs`;
  }
  /** Names of the workflows that have (or had) runs, registered or not. */
  workflowNames(): string {
    return `${this.base}wfnames`;
  }
  /**
   * The glob (after `{prefix}:`, as `scanPrefix` takes it) of every workflow's `workflowRuns` key.
   * It matches no other key: `wf:<name>:active` and `wf:<name>:parked` never end in ":runs", and
   * `wfstatus:` keys do not start with "wf:".
   */
  workflowRunsPattern(): string {
    return 'wf:*:runs';
  }
  /** The workflow whose `workflowRuns` key `key` is (a key found with `workflowRunsPattern`), or undefined when it is none. */
  workflowOfRuns(key: string): string | undefined {
    const head = `${this.base}wf:`;
    const tail = ':runs';
    if (!key.startsWith(head) || !key.endsWith(tail) || key.length <= head.length + tail.length) return undefined;
    return key.slice(head.length, -tail.length);
  }
  /**
   * Runs of one workflow in one status, scored like the status indexes (running included, by
   * creation time). The status is one of the status words, without `:` and the workflow name ends the key,
   * so `wfstatus:<status>:<workflow>` splits one way only; its first segment is its own.
   */
  workflowStatusRuns(status: string, workflow: string): string {
    return `${this.base}wfstatus:${status}:${workflow}`;
  }
  /**
   * Scheduled runs waiting in a step, scored by creation time: `waiting:<kind>` every run waiting
   * on that kind of step, `waiting:<kind>:<name>` (signals and events) those waiting on that name.
   * The kind is a fixed word without `:` and the name ends the key; `waiting` is a first segment of its own.
   */
  waiting(kind: string, name?: string): string {
    return name === undefined ? `${this.base}waiting:${kind}` : `${this.base}waiting:${kind}:${name}`;
  }
  /** Set to the index version once the (workflow, status) index covers runs created before it existed. */
  workflowStatusIndexMarker(): string {
    return `${this.base}index:wfstatus`;
  }
  /** `|` cannot occur in workflow names, so workflow "a:b" + key "c" and "a" + "b:c" stay apart. */
  idempotency(workflow: string, key: string): string {
    return `${this.base}idem:${workflow}|${key}`;
  }
  /**
   * The versions of a workflow that workers serve: field `<version>` → when a worker last served
   * it (ms), `<version>\n<worker id>` → until when that worker serves it (ms, renewed).
   */
  workflowVersions(workflow: string): string {
    return `${this.base}wfversions:${workflow}`;
  }
  workflows(): string {
    return `${this.base}workflows`;
  }
  /** The live workers: worker id → JSON of its `WorkerInfo` and `expiresAt` (written by `presence`). */
  workers(): string {
    return `${this.base}workers`;
  }
  workflow(name: string): string {
    return `${this.base}workflow:${name}`;
  }
  debounce(workflow: string, key: string): string {
    return `${this.base}debounce:${workflow}|${key}`;
  }
  /** Workflows subscribed to an event. */
  eventSubscribers(event: string): string {
    return `${this.base}event:${event}:subs`;
  }
  /** Events emitted for a later time: event id → emitAt. */
  eventsDue(): string {
    return `${this.base}events:due`;
  }
  /** Cron id → definition JSON. */
  cronDefs(): string {
    return `${this.base}cron:defs`;
  }
  /** Cron id → its next tick (ms); a paused schedule has none. */
  cronNext(): string {
    return `${this.base}cron:next`;
  }
  /** Cron id → the id of the run its latest tick started (the overlap policies read it). */
  cronLast(): string {
    return `${this.base}cron:last`;
  }
  /** Cron id → the tick held by `overlap: 'buffer-one'` until the previous run ends. */
  cronBuffered(): string {
    return `${this.base}cron:buffered`;
  }
  /** Queue name → JSON `{ note?, at }` of a paused queue: workers claim none of its runs. */
  queuesPaused(): string {
    return `${this.base}queues:paused`;
  }
  /** Cron id → JSON `{ note?, at }` of a paused schedule. */
  cronPaused(): string {
    return `${this.base}cron:paused`;
  }
  /** Cron id → how many runs its ticks started (a schedule with a `limit` ends there). */
  cronCount(): string {
    return `${this.base}cron:count`;
  }
  /** Written while Redis is down or refusing writes, to learn when it takes writes again. */
  probe(): string {
    return `${this.base}probe`;
  }
  /** The run event stream (XADD by the scripts, trimmed to about `events.maxLen`; read by `client.events()`). */
  events(): string {
    return `${this.base}events`;
  }
  cancelChannel(): string {
    return `${this.base}cancel`;
  }
  /** Pub/sub channel of ended runs: what `result()` and `waitForRun` wake on. */
  endedChannel(): string {
    return `${this.base}ended`;
  }
  /** Signs the dashboard's anti-CSRF tokens; shared by every replica serving the dashboard. */
  dashboardSecret(): string {
    return `${this.base}dashboard-secret`;
  }
}
