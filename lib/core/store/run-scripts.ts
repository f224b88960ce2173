import { ScriptCaller } from './script-caller';

/**
 * A claimed run: its id, the lease token it was claimed with, and its hash (for a first attempt,
 * the fields a worker reads: `CLAIM_FIELDS` in `includes/claim.lua`).
 */
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

/** A claim that took no run because the queue is paused (`WorkflowQueues.pause`). */
export interface PausedClaim {
  paused: true;
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

function toHash(flat: string[]): Record<string, string> {
  const hash: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) hash[flat[i]] = flat[i + 1];
  return hash;
}

function toClaimed(reply: unknown[] | null | undefined, offset: number, token: string, leaseUntil: number): ClaimedRun | null {
  if (!reply || reply[offset] == null) return null;
  return { runId: String(reply[offset]), token, hash: toHash(reply[offset + 1] as string[]), leaseUntil };
}

/** What `enqueue` (and each item of `enqueueMany`) creates. */
export interface EnqueueArgs {
  runId: string;
  workflow: string;
  /** '' takes the registry entry's queue. */
  queue: string;
  /** '' takes the registry entry's maxAttempts. */
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
}

/**
 * The scripts of a run's life: created, claimed, its steps stored, its attempt ended, its lease
 * renewed or reaped, and ended, deleted or resumed from outside.
 */
export class RunScripts extends ScriptCaller {
  async enqueue(a: EnqueueArgs): Promise<{ kind: 'created' | 'existing' | 'conflict' | 'unknown' | 'dynamic'; runId: string }> {
    const k = this.keys;
    const runKey = k.run(a.runId);
    const idempotencyKey = a.idempotencyKey ? k.idempotency(a.workflow, a.idempotencyKey) : runKey;
    const keys = [runKey, idempotencyKey, a.debounce ? k.debounce(a.workflow, a.debounce.key) : runKey];
    const reply = (await this.call('enqueue', keys, {
      base: k.base,
      runId: a.runId,
      workflow: a.workflow,
      queue: a.queue,
      maxAttempts: a.maxAttempts,
      input: a.input,
      now: a.now,
      runAt: a.runAt,
      idempotencyKey: a.idempotencyKey,
      idempotencyTtlSec: a.idempotencyTtlSec,
      debounceKey: a.debounce?.key ?? '',
      debouncePeriodMs: a.debounce?.periodMs ?? 0,
      debounceTimeoutMs: a.debounce?.timeoutMs ?? 0,
      localFlow: a.localFlow ? '1' : '0',
      extra: a.extra,
    })) as [string, string];
    return { kind: reply[0] as 'created', runId: reply[1] };
  }

  /**
   * `enqueue-many-1.lua`: creates the runs in one call, all or none. Each item is `created` or
   * `existing` (its idempotency key, or a debounce, found a run); or the call stored nothing and
   * `failed` says which item stopped it and why.
   */
  async enqueueMany(
    items: readonly EnqueueArgs[],
    now: number,
  ): Promise<
    { runs: Array<{ kind: 'created' | 'existing'; runId: string }> } | { failed: { kind: 'conflict' | 'unknown' | 'dynamic'; index: number; runId: string } }
  > {
    const flat: Array<string | number> = [];
    for (const a of items) {
      flat.push(a.runId, a.workflow, a.queue, a.maxAttempts, a.input, a.runAt, a.idempotencyKey, a.idempotencyTtlSec);
      flat.push(a.debounce?.key ?? '', a.debounce?.periodMs ?? 0, a.debounce?.timeoutMs ?? 0, a.localFlow ? '1' : '0', a.extra.length, ...a.extra);
    }
    const reply = (await this.call('enqueue-many', [this.keys.run(items[0].runId)], { base: this.keys.base, now, items: flat })) as string[];
    if (reply[0] !== 'ok') return { failed: { kind: reply[0] as 'conflict', index: Number(reply[1]), runId: String(reply[2]) } };
    const runs: Array<{ kind: 'created' | 'existing'; runId: string }> = [];
    for (let i = 1; i < reply.length; i += 2) runs.push({ kind: reply[i] as 'created', runId: reply[i + 1] });
    return { runs };
  }

  /**
   * `now` is workflow time; the lease of `leaseMs` runs from real time (leases detect dead processes).
   * `skip`: workflows whose queued runs are left in the list for a worker with their version; when
   * nothing was claimed but such a run was left, the reply is `{ skipped: workflow }`.
   */
  async claim(queue: string, token: string, now: number, leaseMs: number): Promise<ClaimedRun | null>;
  async claim(queue: string, token: string, now: number, leaseMs: number, skip: readonly string[]): Promise<ClaimedRun | SkippedClaim | PausedClaim | null>;
  async claim(queue: string, token: string, now: number, leaseMs: number, skip?: readonly string[]): Promise<ClaimedRun | SkippedClaim | PausedClaim | null> {
    const k = this.keys;
    const leaseUntil = Date.now() + leaseMs;
    const reply = (await this.call('claim', [k.ready(queue), k.leases()], { base: k.base, token, now, leaseUntil, skip: skip ?? [] })) as unknown[] | null;
    // Without `skip` (the one-run form), a paused queue reads as an empty one.
    if (reply?.[0] === '' && reply[2] === 'paused') return skip === undefined ? null : { paused: true };
    if (reply?.[0] === '') return { skipped: String(reply[1]) };
    return toClaimed(reply, 0, token, leaseUntil);
  }

  async checkpoint(runId: string, token: string, now: number, records: string[]): Promise<'ok' | 'canceled' | 'terminated' | 'lost'> {
    const k = this.keys;
    return (await this.call('checkpoint', [k.run(runId), k.leases()], { runId, token, now, base: k.base, records })) as 'ok';
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
    const reply = (await this.call('finish', [k.run(a.runId), k.leases(), k.ready(a.queue), k.scheduled(a.queue)], {
      base: k.base,
      runId: a.runId,
      token: a.token,
      now: a.now,
      outcome: a.outcome,
      payload: a.payload,
      dueAt: a.dueAt,
      nextToken: a.nextToken,
      leaseUntil,
      waitFields: a.waitFields.join('\n'),
      records: a.records,
    })) as unknown[];
    return { code: reply[0] as FinishResult['code'], next: toClaimed(reply, 1, a.nextToken, leaseUntil) };
  }

  async heartbeat(leaseUntil: number, leases: string[]): Promise<string[]> {
    return (await this.call('heartbeat', [this.keys.leases()], { base: this.keys.base, leaseUntil, leases })) as string[];
  }

  async promote(queue: string, now: number, batch: number): Promise<{ moved: number; nextDue: number }> {
    const k = this.keys;
    const [moved, nextDue] = (await this.call('promote', [k.scheduled(queue), k.ready(queue)], { base: k.base, now, batch })) as [number, number];
    return { moved: Number(moved), nextDue: Number(nextDue) };
  }

  async reap(now: number, batch: number, maxRecoveries: number): Promise<string[]> {
    return (await this.call('reap', [this.keys.leases()], { base: this.keys.base, now, batch, maxRecoveries })) as string[];
  }

  async cancel(runId: string, now: number, errorJson: string, reason: string, compensate = false): Promise<string> {
    const k = this.keys;
    return (await this.call('cancel', [k.run(runId), k.leases()], {
      base: k.base,
      runId,
      now,
      errorJson,
      reason,
      cancelChannel: k.cancelChannel(),
      compensate: compensate ? '1' : '',
    })) as string;
  }

  /** `terminate-2.lua`: ends a live run (and the children it waits on) as terminated; else its terminal status or 'missing'. */
  async terminate(runId: string, now: number, errorJson: string, reason: string): Promise<string> {
    const k = this.keys;
    return (await this.call('terminate', [k.run(runId), k.leases()], { base: k.base, runId, now, errorJson, reason })) as string;
  }

  /**
   * `delete-run-2.lua`: deletes an ended run with everything it owns; a live one only with `force`
   * (terminated first, in the same call). Returns 'ok', 'missing', or the status of a refused live run.
   */
  async deleteRun(runId: string, now: number, force: boolean, errorJson: string, reason: string): Promise<string> {
    const k = this.keys;
    return (await this.call('delete-run', [k.run(runId), k.leases()], { base: k.base, runId, now, force: force ? '1' : '0', errorJson, reason })) as string;
  }

  /** `resume-1.lua`: queues a failed, canceled or terminated run again under its id; else 'missing', 'corrupt' or its status. */
  async resume(runId: string, now: number): Promise<string> {
    return (await this.call('resume', [this.keys.run(runId)], { base: this.keys.base, runId, now })) as string;
  }
}
