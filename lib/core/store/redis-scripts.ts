import { Cluster, ReplyError, type Redis } from 'ioredis';
import type { RedisConnection } from './connection';
import { isWriteRefusedReply, RedisScriptError, RedisUnavailableError, RedisWriteRefusedError } from '../errors';
import { RedflowKeys } from './keys';
import { outageKind, redisAddress } from './redis-health';
import { SCRIPTS, commandName, loadLibrary, loadScript, type ScriptName } from './scripts/script-loader';
import { ENDED_STATUSES, type EndedStatus } from '../definition/run-types';

/** A Redis connection: standalone or Cluster. */
export type { RedisConnection };

type ScriptCommand = (...args: (string | number)[]) => Promise<unknown>;

/** A claimed run: its id, the lease token it was claimed with, and its hash (for a first attempt, the fields a worker reads: `CLAIM_FIELDS` in `includes/claim.lua`). */
export interface ClaimedRun {
  runId: string;
  token: string;
  hash: Record<string, string>;
  /** The lease's expiry the claim asked for (ms, real time, taken before the call was sent). */
  leaseUntil: number;
}

/** A claim that took no run, but left runs of `skipped` (a workflow of another version) in the list. */
export interface SkippedClaim {
  skipped: string;
}

/** Result of ending an attempt. */
export interface FinishResult {
  code: 'ok' | 'canceled' | 'terminated' | 'lost';
  next: ClaimedRun | null;
}

/**
 * How an attempt ends (`finish-4.lua`). `compensate`: the run failed for good and becomes
 * `compensating`, its lease kept; a compensating run then ends `failed`, `canceled` or
 * `compensation_failed`.
 */
export type FinishOutcome = 'succeeded' | 'failed' | 'retry' | 'wait' | 'compensate' | 'canceled' | 'compensation_failed';

/** Where a step's record goes when a script writes it together with its effect. */
export interface StepTarget {
  runId: string;
  token: string;
  field: string;
  seq: number;
  attempt: number;
}

const loadedSources = new Map<ScriptName, string>();
function source(name: ScriptName): string {
  let text = loadedSources.get(name);
  if (!text) {
    text = loadScript(name);
    loadedSources.set(name, text);
  }
  return text;
}

/** The ARGV of a step record a script writes with its effect; empty values when there is none. */
function stepArgs(step: StepTarget | undefined): (string | number)[] {
  return step ? [step.runId, step.token, step.field, step.seq, step.attempt] : ['', '', '', 0, 0];
}

function toHash(flat: string[]): Record<string, string> {
  const hash: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) hash[flat[i]] = flat[i + 1];
  return hash;
}

function toClaimed(reply: unknown[] | null | undefined, offset: number, token: string, leaseUntil: number): ClaimedRun | null {
  if (!reply || reply[offset] == null) return null;
  return { runId: String(reply[offset]), token, hash: toHash(reply[offset + 1] as string[]), leaseUntil };
}

/**
 * FCALL answered without running anything: the function is not loaded there yet, or this Redis
 * (6.2, a managed service) or this user cannot run functions at all. A script's own errors never
 * read like these.
 */
function isFunctionMissing(error: unknown): boolean {
  return error instanceof Error && /^ERR Function not found|unknown command|NOPERM|not (available|supported|allowed)/i.test(error.message);
}

/** FUNCTION LOAD refused because this Redis or this user has no functions: EVALSHA instead. */
function isFunctionUnsupported(error: unknown): boolean {
  return error instanceof Error && /unknown command|unknown subcommand|NOPERM|not (available|supported|allowed)/i.test(error.message);
}

/** Deletes the `redflow_` libraries of a node other than `keep` (earlier builds' scripts). */
async function deleteOtherLibraries(node: Redis, keep: string): Promise<void> {
  const listed = (await node.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'redflow_*')) as unknown[];
  const names: string[] = [];
  for (const entry of listed ?? []) {
    const fields = entry instanceof Map ? [...entry.entries()].flat() : (entry as unknown[]);
    const at = fields.indexOf('library_name');
    if (at >= 0) names.push(String(fields[at + 1]));
  }
  for (const name of names) {
    if (name.startsWith('redflow_') && name !== keep) await node.call('FUNCTION', 'DELETE', name).catch(() => undefined);
  }
}

/**
 * The error a failed script call rejects with: Redis's reply under a named class, and never the
 * script's source (ioredis attaches the EVAL arguments to its errors).
 */
function scriptFailure(script: ScriptName, error: unknown, address: string): Error {
  if (!(error instanceof Error)) return new RedisScriptError(script, String(error));
  const reply = error.message.split('\n')[0];
  if (error instanceof ReplyError) {
    if (isWriteRefusedReply(reply)) return new RedisWriteRefusedError(script, reply);
    if (outageKind(error) === 'unreachable') return new RedisUnavailableError(address, reply);
    return new RedisScriptError(script, reply);
  }
  if (outageKind(error) === 'unreachable') return new RedisUnavailableError(address, reply);
  return error;
}

/**
 * The only place that calls the Lua scripts: it registers them once per connection and builds
 * every KEYS/ARGV array, so script contracts live in one file next to the scripts' headers.
 */
export class RedisScripts {
  private readonly commands = {} as Record<ScriptName, ScriptCommand>;
  /**
   * How scripts are called: as functions of one Redis Functions library (FCALL; Redis 7.0 and
   * later), or with EVALSHA (Redis 6.2, or a user without the FUNCTION command). Found on the
   * first call; `REDFLOW_SCRIPT_MODE=eval` forces EVALSHA.
   */
  private mode: 'unknown' | 'function' | 'eval';
  private loading: Promise<void> | undefined;
  /** Loads finished (or failed) so far: a call that failed before the latest one ended needs no other. */
  private loads = 0;
  private loadedOnce = false;

  /**
   * @param eventsMaxLen the event stream's MAXLEN (0: off). Appended to every call's ARGV, where
   * each script's prologue (`includes/events-max-len.lua`) takes it off again.
   */
  constructor(
    readonly redis: RedisConnection,
    readonly keys: RedflowKeys,
    readonly eventsMaxLen: number = 0,
  ) {
    this.mode = process.env.REDFLOW_SCRIPT_MODE === 'eval' ? 'eval' : 'unknown';
    const library = loadLibrary();
    const target = redis as unknown as Record<string, ScriptCommand>;
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      const cmd = commandName(name);
      if (typeof target[cmd] !== 'function') {
        redis.defineCommand(cmd, { numberOfKeys: SCRIPTS[name], lua: source(name) });
      }
      const viaEval = target[cmd].bind(redis);
      const fn = library.functions[name];
      const numKeys = SCRIPTS[name];
      this.commands[name] = (...args) =>
        this.invoke(fn, numKeys, viaEval, [...args, eventsMaxLen]).catch((error: unknown) => {
          throw scriptFailure(name, error, redisAddress(redis));
        });
    }
  }

  private usesEval(): boolean {
    return this.mode === 'eval';
  }

  /** Calls a script as a function of the library, loading the library when Redis lacks it (a new or restarted Redis). */
  private async invoke(fn: string, numKeys: number, viaEval: ScriptCommand, args: (string | number)[]): Promise<unknown> {
    if (this.usesEval()) return viaEval(...args);
    const loads = this.loads;
    try {
      return await this.redis.fcall(fn, numKeys, ...args);
    } catch (error) {
      if (!isFunctionMissing(error)) throw error;
    }
    // Calls sent together before the library was there all fail: only those sent after the last
    // load finished load it again (Redis lost it since: a restart, a flush).
    if (this.loads === loads) await this.loadLibrary();
    // The load may have found a Redis without FUNCTION: the mode is then 'eval'.
    if (this.usesEval()) return viaEval(...args);
    return this.redis.fcall(fn, numKeys, ...args);
  }

  /**
   * Loads the library on every master (one FUNCTION LOAD each; one already there is kept). The
   * first load of this process also deletes other `redflow_` libraries, left by earlier builds:
   * a process still running one of them loads its own again on its next call. A Redis without
   * FUNCTION (6.2) or a user not allowed to run it switches this client to EVALSHA.
   */
  private async loadLibrary(): Promise<void> {
    this.loading ??= (async () => {
      const library = loadLibrary();
      const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
      try {
        await Promise.all(
          nodes.map(async (node) => {
            await node.call('FUNCTION', 'LOAD', library.code).catch((error: unknown) => {
              if (!/already exists/i.test((error as Error).message)) throw error;
            });
            if (!this.loadedOnce) await deleteOtherLibraries(node, library.name);
          }),
        );
        this.mode = 'function';
        this.loadedOnce = true;
      } catch (error) {
        if (!isFunctionUnsupported(error)) throw error;
        this.mode = 'eval';
      }
    })().finally(() => {
      this.loading = undefined;
      this.loads++;
    });
    await this.loading;
  }

  async enqueue(a: {
    runId: string;
    workflow: string;
    queue: string;
    maxAttempts: string;
    input: string;
    now: number;
    runAt: number;
    idempotencyKey: string;
    idempotencyTtlSec: number;
    debounce?: { key: string; periodMs: number; timeoutMs: number };
    /** True when the caller has the definition and computed `debounce` and `extra` from it. */
    localFlow: boolean;
    /** mutex, throttle, rateLimit fields (pairs). */
    extra: string[];
  }): Promise<{ kind: 'created' | 'existing' | 'conflict' | 'unknown' | 'dynamic'; runId: string }> {
    const k = this.keys;
    const runKey = k.run(a.runId);
    const reply = (await this.commands.enqueue(
      runKey,
      a.idempotencyKey ? k.idempotency(a.workflow, a.idempotencyKey) : runKey,
      a.debounce ? k.debounce(a.workflow, a.debounce.key) : runKey,
      k.base,
      a.runId,
      a.workflow,
      a.queue,
      a.maxAttempts,
      a.input,
      a.now,
      a.runAt,
      a.idempotencyKey,
      a.idempotencyTtlSec,
      a.debounce?.key ?? '',
      a.debounce?.periodMs ?? 0,
      a.debounce?.timeoutMs ?? 0,
      a.localFlow ? '1' : '0',
      ...a.extra,
    )) as [string, string];
    return { kind: reply[0] as 'created', runId: reply[1] };
  }

  /**
   * `now` is workflow time; the lease of `leaseMs` runs from real time (leases detect dead processes).
   * `skip`: workflows whose queued runs are left in the list for a worker with their version; when
   * nothing was claimed but such a run was left, the reply is `{ skipped: workflow }`.
   */
  async claim(queue: string, token: string, now: number, leaseMs: number): Promise<ClaimedRun | null>;
  async claim(queue: string, token: string, now: number, leaseMs: number, skip: readonly string[]): Promise<ClaimedRun | SkippedClaim | null>;
  async claim(queue: string, token: string, now: number, leaseMs: number, skip: readonly string[] = []): Promise<ClaimedRun | SkippedClaim | null> {
    const k = this.keys;
    const leaseUntil = Date.now() + leaseMs;
    const reply = (await this.commands.claim(k.ready(queue), k.leases(), k.base, token, now, leaseUntil, ...skip)) as unknown[] | null;
    if (reply?.[0] === '') return { skipped: String(reply[1]) };
    return toClaimed(reply, 0, token, leaseUntil);
  }

  async checkpoint(runId: string, token: string, now: number, records: string[]): Promise<'ok' | 'canceled' | 'terminated' | 'lost'> {
    return (await this.commands.checkpoint(this.keys.run(runId), this.keys.leases(), runId, token, now, this.keys.base, ...records)) as 'ok';
  }

  async finish(a: {
    runId: string;
    queue: string;
    token: string;
    now: number;
    outcome: FinishOutcome;
    payload: string;
    dueAt: number;
    /** Lease token for claiming the next run of the queue, or '' to claim none. */
    nextToken: string;
    /** Lease of the next run; it runs from real time, as every lease. */
    leaseMs: number;
    /** For 'wait' on children: the awaited step fields. */
    waitFields: string[];
    records: string[];
  }): Promise<FinishResult> {
    const k = this.keys;
    const leaseUntil = Date.now() + a.leaseMs;
    const reply = (await this.commands.finish(
      k.run(a.runId),
      k.leases(),
      k.ready(a.queue),
      k.scheduled(a.queue),
      k.base,
      a.runId,
      a.token,
      a.now,
      a.outcome,
      a.payload,
      a.dueAt,
      a.nextToken,
      leaseUntil,
      a.waitFields.join('\n'),
      ...a.records,
    )) as unknown[];
    return { code: reply[0] as FinishResult['code'], next: toClaimed(reply, 1, a.nextToken, leaseUntil) };
  }

  async cancel(runId: string, now: number, errorJson: string, reason: string, compensate = false): Promise<string> {
    const k = this.keys;
    return (await this.commands.cancel(k.run(runId), k.leases(), k.base, runId, now, errorJson, reason, k.cancelChannel(), compensate ? '1' : '')) as string;
  }

  /** `terminate-2.lua`: ends a live run (and the children it waits on) as terminated; else its terminal status or 'missing'. */
  async terminate(runId: string, now: number, errorJson: string, reason: string): Promise<string> {
    const k = this.keys;
    return (await this.commands.terminate(k.run(runId), k.leases(), k.base, runId, now, errorJson, reason)) as string;
  }

  /**
   * `delete-run-2.lua`: deletes an ended run with everything it owns; a live one only with `force`
   * (terminated first, in the same call). Returns 'ok', 'missing', or the status of a refused live run.
   */
  async deleteRun(runId: string, now: number, force: boolean, errorJson: string, reason: string): Promise<string> {
    const k = this.keys;
    return (await this.commands['delete-run'](k.run(runId), k.leases(), k.base, runId, now, force ? '1' : '0', errorJson, reason)) as string;
  }

  /** `resume-1.lua`: queues a failed, canceled or terminated run again under its id; else 'missing', 'corrupt' or its status. */
  async resume(runId: string, now: number): Promise<string> {
    return (await this.commands.resume(this.keys.run(runId), this.keys.base, runId, now)) as string;
  }

  /**
   * `presence-1.lua`: this worker serves these workflow versions until `expiry` (real time), or,
   * with expiry 0, no longer serves them.
   */
  async presence(workerId: string, now: number, expiry: number, versions: Array<[workflow: string, version: number]>): Promise<void> {
    if (!versions.length) return;
    await this.commands.presence(this.keys.workflows(), this.keys.base, now, expiry, workerId, ...versions.flat());
  }

  async heartbeat(leaseUntil: number, leases: string[]): Promise<string[]> {
    return (await this.commands.heartbeat(this.keys.leases(), this.keys.base, leaseUntil, ...leases)) as string[];
  }

  async promote(queue: string, now: number, batch: number): Promise<{ moved: number; nextDue: number }> {
    const k = this.keys;
    const [moved, nextDue] = (await this.commands.promote(k.scheduled(queue), k.ready(queue), k.base, now, batch)) as [number, number];
    return { moved: Number(moved), nextDue: Number(nextDue) };
  }

  async reap(now: number, batch: number, maxRecoveries: number): Promise<string[]> {
    return (await this.commands.reap(this.keys.leases(), this.keys.base, now, batch, maxRecoveries)) as string[];
  }

  async syncRegistry(owner: string, now: number, prune: boolean, entries: string[]): Promise<string[]> {
    const k = this.keys;
    return (await this.commands['sync-registry'](k.workflows(), k.cronDefs(), k.cronNext(), k.base, owner, now, prune ? '1' : '0', ...entries)) as string[];
  }

  async startChild(a: {
    step: StepTarget;
    now: number;
    mode: 'wait' | 'emit' | 'race';
    childId: string;
    workflow: string;
    queue: string;
    maxAttempts: string;
    input: string;
    runAt: number;
    idempotencyKey: string;
    idempotencyTtlSec: number;
    deadline: number;
    /** True when the caller has the child's definition and computed `debounce` and `extra` from it. */
    localFlow: boolean;
    debounce?: { key: string; periodMs: number; timeoutMs: number };
    extra: string[];
  }): Promise<{ code: 'ok' | 'lost' | 'unknown' | 'conflict' | 'dynamic'; childId: string; record: string }> {
    const k = this.keys;
    const reply = (await this.commands['start-child'](
      k.run(a.step.runId),
      k.base,
      ...stepArgs(a.step),
      a.now,
      a.mode,
      a.childId,
      a.workflow,
      a.queue,
      a.maxAttempts,
      a.input,
      a.runAt,
      a.idempotencyKey,
      a.idempotencyTtlSec,
      a.deadline,
      a.localFlow ? '1' : '0',
      a.debounce ? k.debounce(a.workflow, a.debounce.key) : '',
      a.debounce?.periodMs ?? 0,
      a.debounce?.timeoutMs ?? 0,
      ...a.extra,
    )) as string[];
    return { code: reply[0] as 'ok', childId: reply[1] ?? '', record: reply[2] ?? '' };
  }

  /** `signal-2.lua`: delivers a signal into the waiting step, or buffers it. */
  async signal(runId: string, name: string, payload: string, now: number, max: number): Promise<'delivered' | 'buffered' | 'full' | 'ended' | 'missing'> {
    return (await this.commands.signal(this.keys.run(runId), this.keys.signals(runId), this.keys.base, runId, name, payload, now, max)) as 'delivered';
  }

  /** `wait-signal-2.lua`: consumes a buffered signal, records a timeout, or records the wait. */
  async waitSignal(step: StepTarget, name: string, deadline: number, now: number): Promise<{ code: 'lost' | 'got' | 'timeout' | 'wait'; record: string }> {
    const [code, record] = (await this.commands['wait-signal'](this.keys.run(step.runId), this.keys.signals(step.runId), this.keys.base, ...stepArgs(step), name, deadline, now)) as [
      'lost' | 'got' | 'timeout' | 'wait',
      string?,
    ];
    return { code, record: record ?? '' };
  }

  /**
   * `wait-any-2.lua`: decides a step.waitForAny race (a branch won, or one is ready now) and ends it,
   * or records and registers it. `race` is the new race record and its branches, when the step has none.
   */
  async waitAny(step: StepTarget, now: number, race?: { record: string; branches: string }): Promise<{ code: 'lost' | 'corrupt' | 'done' | 'wait'; record: string }> {
    const [code, record] = (await this.commands['wait-any'](this.keys.run(step.runId), this.keys.signals(step.runId), this.keys.base, step.runId, step.token, step.field, now, race?.record ?? '', race?.branches ?? '')) as [
      'lost' | 'corrupt' | 'done' | 'wait',
      string?,
    ];
    return { code, record: record ?? '' };
  }

  /** `wait-event-1.lua`: records a timeout, or records and registers the wait. */
  async waitEvent(step: StepTarget, event: string, deadline: number, now: number, match: { shape: string; hash: string; json: string }): Promise<{ code: 'lost' | 'got' | 'timeout' | 'wait'; record: string }> {
    const [code, record] = (await this.commands['wait-event'](this.keys.run(step.runId), this.keys.base, ...stepArgs(step), event, deadline, now, match.shape, match.hash, match.json)) as [
      'lost' | 'got' | 'timeout' | 'wait',
      string?,
    ];
    return { code, record: record ?? '' };
  }

  /** `register-cancel-on-1.lua`: registers a run's cancelOn triggers. */
  async registerCancelOn(runId: string, token: string, triggers: Array<{ event: string; shape: string; hash: string }>): Promise<'ok' | 'lost'> {
    const args = triggers.flatMap((t) => [t.event, t.shape, t.hash]);
    return (await this.commands['register-cancel-on'](this.keys.run(runId), this.keys.base, runId, token, ...args)) as 'ok';
  }

  async emitEvent(a: {
    eventId: string;
    event: string;
    payload: string;
    /** The payload's top-level scalar fields (`eventFields`), for the runs waiting on a match. */
    fields: string;
    now: number;
    emitAt: number;
    idempotencyKey: string;
    idempotencyTtlSec: number;
    step?: StepTarget;
  }): Promise<{ code: 'ok' | 'lost'; runIds: string[] }> {
    const k = this.keys;
    const reply = (await this.commands['emit-event'](
      k.eventSubscribers(a.event),
      k.base,
      a.eventId,
      a.event,
      a.payload,
      a.now,
      a.emitAt,
      a.idempotencyKey,
      a.idempotencyTtlSec,
      ...stepArgs(a.step),
      a.fields,
    )) as string[];
    return { code: reply[0] as 'ok', runIds: reply.slice(1) };
  }

  async fireEvents(now: number, batch: number): Promise<number> {
    return Number(await this.commands['fire-events'](this.keys.eventsDue(), this.keys.base, now, batch));
  }

  async cronFire(cronId: string, tick: number, next: number, workflow: string, input: string, now: number): Promise<'fired' | 'skipped' | 'taken' | 'unknown'> {
    return (await this.commands['cron-fire'](this.keys.cronNext(), this.keys.base, cronId, tick, next, workflow, input, now)) as 'fired';
  }

  /**
   * `schedule-2.lua`: adds or replaces the runtime schedule stored as `cronId`; an unchanged one
   * keeps its next tick. `local`: the caller has the workflow's definition, so it need not be
   * registered in Redis yet.
   */
  async schedule(a: { cronId: string; def: string; next: number; workflow: string; local: boolean }): Promise<
    { outcome: 'created' | 'replaced' | 'unchanged'; nextAt: number } | { outcome: 'unknown' } | { outcome: 'dynamic' }
  > {
    const k = this.keys;
    const [outcome, next] = (await this.commands.schedule(k.cronDefs(), k.cronNext(), k.base, a.cronId, a.def, a.next, a.workflow, a.local ? '1' : '0')) as [string, string?];
    if (outcome === 'unknown') return { outcome };
    if (outcome === 'dynamic') return { outcome };
    return { outcome: outcome as 'created', nextAt: Number(next) };
  }

  /** `unschedule-2.lua`: removes the runtime schedule stored as `cronId`; false when there was none. */
  async unschedule(cronId: string): Promise<boolean> {
    const k = this.keys;
    return Number(await this.commands.unschedule(k.cronDefs(), k.cronNext(), k.base, cronId)) === 1;
  }

  async cleanup(cutoff: number, batch: number): Promise<number> {
    const k = this.keys;
    // In this order: the script takes each index to be that of its status.
    return Number(await this.commands.cleanup(...ENDED_STATUSES.map((status) => k.status(status)), k.base, cutoff, batch));
  }

  /**
   * `prune-4.lua`: deletes up to `batch` ended runs of `statuses` that finished before `cutoff`,
   * read from the status indexes or, with `workflow`, from that workflow's (workflow, status)
   * indexes. Returns the runs deleted and the index entries taken (a full batch: call again).
   */
  async prune(a: { cutoff: number; batch: number; statuses: ReadonlySet<EndedStatus>; workflow?: string }): Promise<{ deleted: number; taken: number }> {
    const k = this.keys;
    const indexes = ENDED_STATUSES.map((status) => (a.workflow ? k.workflowStatusRuns(status, a.workflow) : k.status(status)));
    const flags = ENDED_STATUSES.map((status) => (a.statuses.has(status) ? '1' : '0'));
    const [deleted, taken] = (await this.commands.prune(...indexes, k.base, a.cutoff, a.batch, ...flags)) as [number, number];
    return { deleted: Number(deleted), taken: Number(taken) };
  }

  /**
   * Indexes one chunk of a workflow's runs by (workflow, status) while `token` holds the index
   * marker. Returns the next ZSCAN cursor ('0': the workflow is done), or null when the marker is
   * no longer the caller's.
   */
  async backfillRunIndex(a: { workflow: string; token: string; leaseMs: number; cursor: string; count: number }): Promise<{ cursor: string; indexed: number } | null> {
    const k = this.keys;
    const reply = (await this.commands['backfill-run-index'](k.workflowStatusIndexMarker(), k.workflowRuns(a.workflow), k.base, a.token, a.leaseMs, a.cursor, a.count)) as [string, number];
    return reply[0] === 'lost' ? null : { cursor: String(reply[0]), indexed: Number(reply[1]) };
  }

  /** Takes out of a (workflow, status) index those of `runIds` that left that status or no longer exist. */
  async pruneRunIndex(status: string, workflow: string, runIds: string[]): Promise<number> {
    const k = this.keys;
    return Number(await this.commands['prune-run-index'](k.workflowStatusRuns(status, workflow), k.base, status, ...runIds));
  }
}
