import { randomUUID } from 'node:crypto';
import { dueAt, idempotencyTtlSec, timeOption, toMs, type Duration } from '../definition/duration';
import { CanceledError, ConfigurationError, CorruptRunDataError, IdempotencyConflictError, isRetryable, PayloadTooLargeError, RetryAfterError, StepHeartbeatTimeoutError, TimeoutError } from '../errors';
import { dynamicFlowError, flowControlFor } from '../definition/flow-control';
import {
  assertKnownKeys,
  checkDuration,
  type CheckedStepRetry,
  checkHeartbeatTimeout,
  checkIdempotencyKey,
  checkUserName,
  checkStepRetry,
  CHILD_RUN_OPTION_KEYS,
  EMIT_EVENT_STEP_OPTION_KEYS,
  RUN_STEP_OPTION_KEYS,
  STEP_OPTION_KEYS,
  WAIT_FOR_EVENT_OPTION_KEYS,
  WAIT_FOR_SIGNAL_OPTION_KEYS,
  versionQueue,
} from '../definition/option-checks';
import { eventFields, matchKey } from '../definition/event-match';
import type { RedisScripts, StepTarget } from '../store/redis-scripts';
import {
  COMPENSATION_COMMITTED,
  COMPENSATION_FIELD_PREFIX,
  COMPENSATION_PENDING,
  decodeStepRecord,
  DETERMINISTIC_FIELD_PREFIX,
  encodeFailureRecord,
  PATCH_FIELD_PREFIX,
  encodeSleepRecord,
  encodeSuccessRecord,
  encodeTriesRecord,
  parseTriesRecord,
  PROGRESS_FIELD,
  RACE_FIELD_PREFIX,
  type RaceBranchRecord,
  encodeRaceRecord,
  STEP_FIELD_PREFIX,
  TRIES_FIELD_PREFIX,
  VALUE_FIELD_PREFIX,
  type StoredStep,
} from '../store/step-record';
import { stepRetryDelayMs } from '../definition/retry';
import type { HookRunner } from './hook-runner';
import type { Clock } from '../definition/clock';
import type { GuardedSpan, GuardedTracing } from '../definition/tracing';
import { traceFields } from '../store/run-record';
import { JournalGuard } from './journal-guard';

export { STEP_FIELD_PREFIX };
import { deserializeError, encodeInput, encodeJson, serializeError } from '../store/serialization';
import { validateInput } from '../definition/validation';
import type { CompensationContext } from '../definition/step-types';
import { childBranch, eventBranch, raceBranch, raceBranches, type RaceBranchSpec } from '../definition/race';
import type { RaceBranch, RaceResult } from '../definition/step-types';
import { checkEventName, type ChildRunOptions, type EmitEventStepOptions, type RunStepOptions, type StepApi, type StepRunContext, type StepOptions, type WaitForEventOptions, type WaitForSignalOptions, type WorkflowTarget, type WorkflowRegistry } from '../definition/workflow';

/** Thrown through the handler when the run must wait (a timer or a child): not an error. */
export class SuspendSignal extends Error {
  override name = 'SuspendSignal';
}

/**
 * Thrown through the handler of a replay that only collects compensations (a compensating run):
 * the replay reached a step that did not complete, and goes no further.
 */
export class ReplayEndSignal extends SuspendSignal {
  override name = 'ReplayEndSignal';
}

/** A compensation a step registered when it was reached: its function and retry policy. */
export interface RegisteredCompensation {
  fn: (output: unknown, ctx: CompensationContext) => unknown;
  retries: CheckedStepRetry;
}

/** Default retries of a compensation: three tries, 1 s then 2 s apart. */
const DEFAULT_COMPENSATE_RETRIES = { maxAttempts: 3 };

/** Rejects a sibling step after another branch of the same attempt failed. */
export class SiblingStepFailedError extends Error {
  override name = 'SiblingStepFailedError';
}

/** What the step runtime needs from the attempt it belongs to. */
export interface AttemptContext {
  runId: string;
  workflow: string;
  token: string;
  attempt: number;
  leaseMs: number;
  /** Workflow time: due times of retries, waits and timeouts. */
  clock: Clock;
  /** @internal Test step mocks, consulted before a step's function is called. */
  stepMocks?: StepMocks;
  maxPayloadBytes: number;
  scripts: RedisScripts;
  /** Workflows known here: child runs of these are validated before they start. */
  registry: WorkflowRegistry;
  /** Why the attempt must stop (canceled, or the worker lost the run), once it must. */
  stopReason(): Error | undefined;
  /** Sends a call that must reach Redis, waiting out outages (see RunExecutor). */
  call<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Before a step's function runs: undefined while the lease is surely still held, else a promise
   * that renews it and rejects when it was lost (see RunExecutor.confirmLease).
   */
  confirmLease(): Promise<void> | undefined;
  /** Called when a checkpoint finds the run canceled or taken over. */
  onLost(code: 'canceled' | 'terminated' | 'lost'): void;
  /** The worker's lifecycle hooks (onStepStart, onStepComplete, onStepFailed). */
  hooks: HookRunner;
  /** Tracing, when on: child runs store the active trace context. */
  tracing?: GuardedTracing;
  /** The attempt's span, when tracing is on: each try of a step.run function gets a child span. */
  span?: GuardedSpan;
}

/** @internal What a mocked step does instead of calling its function (`nestjs-redflow/testing`). */
export type StepMock = { output: unknown } | { error: unknown };

/** @internal Looks up the mock of a step of a run, by the run id and the step name. */
export type StepMocks = (runId: string, stepName: string) => StepMock | undefined | Promise<StepMock | undefined>;

/** A step whose function is running; it can be stopped from outside. */
interface InflightStep {
  controller?: AbortController;
  reject: (reason: unknown) => void;
}

const noop = () => undefined;

/** Largest progress value, in bytes of JSON. */
export const MAX_PROGRESS_BYTES = 64 * 1024;

/** A step retry waits at least this long (ms) in `scheduled`, freeing the worker slot; shorter ones wait in process. */
const SLOT_FREEING_RETRY_MS = 1_000;

/** An explicit step name: "#" is reserved for repeat suffixes, "|" and newlines separate step fields in scripts. */
const STEP_NAME_RULES = { forbid: '#|', reason: '"#" is reserved for the "#2", "#3" suffix of repeated names and "|" separates fields in scripts' };

/**
 * The durable step API of one attempt. Completed steps come from the run hash loaded by the claim
 * (no round trip). A new step's record is sent lazily: the step resolves as soon as its function
 * returns, and the record is written either by the next step (which waits for it before running
 * anything) or inside the finish script when the handler returns first. So no step's side effects
 * run before every earlier step is durable, at one round trip per step or less.
 */
export class StepRuntime {
  readonly api: StepApi;
  /** The first step error of this attempt: what the attempt reports when siblings were aborted. */
  failure: unknown;
  /** Set when the run must wait: the attempt ends with the `wait` outcome instead of its result. */
  suspension: { dueAt: number; waitFields: string[] } | undefined;
  private readonly calls = new Map<string, number>();
  /** The step fields this attempt has reached so far (replayed or new), for `step.patched`. */
  private readonly reached = new Set<string>();
  /** The answers of `step.patched` in this attempt, by field. */
  private readonly patches = new Map<string, boolean>();
  private readonly inflight = new Set<InflightStep>();
  /** The compensations of the steps reached so far, by step name. */
  readonly compensations = new Map<string, RegisteredCompensation>();
  /** Every field this attempt wrote (step, tries, compensation records...), for the journal a compensation phase reads. */
  private readonly written = new Map<string, string>();
  private readonly effects = new Set<Promise<unknown>>();
  private pending: string[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushError: unknown;
  private flushQueued = false;
  private closed = false;
  private seq: number;
  /** The non-determinism guard of a replay (none for a run without steps, or a compensation replay). */
  readonly guard: JournalGuard | undefined;

  /**
   * `replayOnly`: a replay that only collects the compensations of completed steps (a compensating
   * run): stored results come back as usual, and the first step that did not complete ends the
   * replay (`ReplayEndSignal`) without running anything or writing anything.
   */
  constructor(
    private readonly ctx: AttemptContext,
    private readonly stored: Map<string, string>,
    private readonly replayOnly = false,
  ) {
    this.api = {
      run: (options, fn) => this.run(options, fn),
      waitFor: (options, target) => this.waitFor(options, target),
      runWorkflow: <I, O>(options: ChildRunOptions | string, workflow: WorkflowTarget<I, O>, input: I) =>
        this.track(this.startChild('wait', options, workflow as WorkflowTarget, input)) as Promise<O>,
      emitWorkflow: <I>(options: ChildRunOptions | string, workflow: WorkflowTarget<I>, input: I) =>
        this.track(this.startChild('emit', options, workflow as WorkflowTarget, input)) as Promise<string>,
      emitEvent: (options, event, payload) => this.track(this.emitEvent(options, event, payload)),
      waitForSignal: <T>(options: StepOptions | string, signal: string, waitOptions?: WaitForSignalOptions) =>
        this.track(this.waitForSignal(options, signal, waitOptions)) as Promise<T | null>,
      waitForEvent: <T>(options: StepOptions | string, event: string, waitOptions?: WaitForEventOptions) =>
        this.track(this.waitForEvent(options, event, waitOptions)) as Promise<T | null>,
      setProgress: (value) => this.setField(PROGRESS_FIELD, value, 'The progress of the run', Math.min(MAX_PROGRESS_BYTES, this.ctx.maxPayloadBytes)),
      now: () => this.journaled('now', () => this.ctx.clock.now()),
      random: () => this.journaled('random', () => Math.random()),
      uuid: () => this.journaled('uuid', () => randomUUID()),
      patched: (id) => this.patched(id),
      commit: (name) => this.track(this.commit(name)),
      waitForAny: <B extends Record<string, RaceBranch>>(options: StepOptions | string, branches: B) => this.track(this.waitForAny(options, branches)) as Promise<RaceResult<B>>,
      signal: (name) => raceBranch({ kind: 'signal', signal: name }),
      timer: (target) => raceBranch({ kind: 'timer', target }),
      child: (workflow, input, options) => raceBranch(childBranch(workflow as WorkflowTarget, input, options)),
      event: (event, options) => raceBranch(eventBranch(event, options)),
    };
    let steps = 0;
    for (const field of stored.keys()) if (field.startsWith(STEP_FIELD_PREFIX)) steps++;
    this.seq = steps;
    this.guard = replayOnly ? undefined : JournalGuard.of(ctx.runId, stored);
  }

  /**
   * `step.now()`, `step.random()`, `step.uuid()`: the value made on the first call at this place in
   * the run (the n-th call of a kind is `d:<kind>#n`), stored with the next checkpoint, which every
   * later step waits for before its function runs; a replay returns the stored value. So a step
   * that uses the value (an idempotency key, say) sees the same one in every try.
   */
  private journaled<T extends number | string>(kind: 'now' | 'random' | 'uuid', make: () => T): T {
    this.throwIfStopped();
    const count = (this.calls.get(DETERMINISTIC_FIELD_PREFIX + kind) ?? 0) + 1;
    this.calls.set(DETERMINISTIC_FIELD_PREFIX + kind, count);
    const field = `${DETERMINISTIC_FIELD_PREFIX}${kind}${count === 1 ? '' : `#${count}`}`;
    const stored = this.stored.get(field);
    if (stored !== undefined) {
      let value: unknown;
      try {
        value = JSON.parse(stored);
      } catch {
        value = undefined;
      }
      if (typeof value !== (kind === 'uuid' ? 'string' : 'number')) throw new CorruptRunDataError(this.ctx.runId, `field "${field}" (the value of step.${kind}()) is not a ${kind === 'uuid' ? 'string' : 'number'}`);
      return value as T;
    }
    this.endReplay();
    const value = make();
    this.record(field, JSON.stringify(value));
    return value;
  }

  /**
   * `step.patched(id)`: true for a run that reaches this point running the patched code, false for
   * one whose journal shows it went past this point before the patch existed (stored steps this
   * attempt has not reached yet). The answer is stored (`p:<id>`), so the run keeps it for good.
   */
  private patched(id: string): boolean {
    checkUserName(id, 'The id of step.patched', STEP_NAME_RULES);
    this.throwIfStopped();
    const field = PATCH_FIELD_PREFIX + id;
    const known = this.patches.get(field);
    if (known !== undefined) return known;
    const stored = this.stored.get(field);
    let answer: boolean;
    if (stored === '1' || stored === '0') {
      answer = stored === '1';
    } else if (stored !== undefined) {
      throw new CorruptRunDataError(this.ctx.runId, `field "${field}" (the answer of step.patched("${id}")) is not "1" or "0"`);
    } else {
      this.endReplay();
      answer = true;
      for (const key of this.stored.keys()) {
        if (key.startsWith(STEP_FIELD_PREFIX) && !this.reached.has(key)) {
          answer = false;
          break;
        }
      }
      this.record(field, answer ? '1' : '0');
    }
    this.patches.set(field, answer);
    return answer;
  }

  /** `ctx.setEvent`: publishes a value under `key` on the run (run-hash field `v:<key>`). */
  setEvent(key: string, value: unknown): Promise<void> {
    checkUserName(key, 'The key of ctx.setEvent');
    return this.setField(VALUE_FIELD_PREFIX + key, value, `The value of run event "${key}"`, this.ctx.maxPayloadBytes);
  }

  /**
   * Resolves when every child start and event emit of this attempt has settled. A Promise.all in
   * the handler rejects at the first suspension while a sibling's script reply may still be on
   * its way; the attempt must not end before that sibling records its wait or failure.
   */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.effects]);
  }

  private track<T>(effect: Promise<T>): Promise<T> {
    this.effects.add(effect);
    const done = () => this.effects.delete(effect);
    effect.then(done, done);
    return effect;
  }

  /** Stops every running step at once (their signals abort and their promises reject). */
  interrupt(reason: Error): void {
    for (const step of this.inflight) this.stop(step, reason);
  }

  /** Ends the attempt's step API and returns the records the finish script must write. */
  takePending(): string[] {
    this.closed = true;
    const records = this.pending;
    this.pending = [];
    return records;
  }

  /**
   * Gives a step call its unique name (synchronously, in call order, so replays of loops and
   * Promise.all match) and its stored record, if any.
   */
  private begin<O extends { name: string; timeoutMs?: number }>(
    api: string,
    options: O | string,
    known: readonly string[] = STEP_OPTION_KEYS,
  ): { opts: O; name: string; field: string; record?: StoredStep } {
    const opts = (typeof options === 'string' ? { name: options } : options) as O;
    assertKnownKeys(`step.${api} options`, opts, known);
    if (opts?.timeoutMs !== undefined) checkDuration(opts.timeoutMs, `timeoutMs of step.${api}`, { timer: true });
    if (!opts || typeof opts.name !== 'string' || opts.name === '') {
      throw new ConfigurationError(`step.${api} needs a non-empty name: step.${api}({ name: "charge" }, ...) or step.${api}("charge", ...).`);
    }
    checkUserName(opts.name, `The step name of step.${api}`, STEP_NAME_RULES);
    const count = (this.calls.get(opts.name) ?? 0) + 1;
    this.calls.set(opts.name, count);
    const name = count === 1 ? opts.name : `${opts.name}#${count}`;
    const field = STEP_FIELD_PREFIX + name;
    this.reached.add(field);
    const stored = this.stored.get(field);
    const record = stored === undefined ? undefined : decodeStepRecord(this.ctx.runId, field, stored);
    this.guard?.reach(name, record !== undefined);
    return { opts, name, field, record };
  }

  private async run<T>(options: RunStepOptions | string, fn: (ctx: StepRunContext) => T | Promise<T>): Promise<T> {
    const { opts, name, field, record } = this.begin<RunStepOptions>('run', options, RUN_STEP_OPTION_KEYS);
    const compensable = this.registerCompensation(name, opts);
    const heartbeatMs = opts.heartbeatTimeout === undefined ? undefined : checkHeartbeatTimeout(opts.heartbeatTimeout, `heartbeatTimeout of step "${name}"`);
    if (record?.kind === 'succeeded') return record.output as T;
    const policy = opts.retries === undefined ? undefined : checkStepRetry(opts.retries, `retries of step "${name}"`);
    const triesField = TRIES_FIELD_PREFIX + name;
    const stored = this.stored.get(triesField);
    const tries = stored === undefined ? undefined : parseTriesRecord(this.ctx.runId, triesField, stored);
    let failures = tries?.failures ?? 0;
    let inAttempt = tries?.runAttempt === this.ctx.attempt ? tries.failuresInRunAttempt : 0;
    // Woken before its retry was due (a sibling's wait ended first): wait again until it is.
    if (record?.kind === 'failed' && tries && tries.runAttempt === this.ctx.attempt && tries.retryAt > this.ctx.clock.now()) this.suspend(tries.retryAt);
    for (;;) {
      await this.ready();
      const startedAt = Date.now();
      const hook = { runId: this.ctx.runId, workflow: this.ctx.workflow, attempt: this.ctx.attempt, step: name };
      this.ctx.hooks.emit('onStepStart', hook);
      const span = this.ctx.span?.startStep({ step: name, stepAttempt: failures + 1 });
      try {
        const output = await (span ? span.activate(() => this.execute(name, field, opts.timeoutMs, heartbeatMs, fn, compensable)) : this.execute(name, field, opts.timeoutMs, heartbeatMs, fn, compensable));
        span?.end({ outcome: 'succeeded' });
        this.ctx.hooks.emit('onStepComplete', { ...hook, output, durationMs: Date.now() - startedAt });
        return output;
      } catch (error) {
        if (error instanceof SiblingStepFailedError || error instanceof CanceledError || error instanceof SuspendSignal || this.ctx.stopReason()) {
          span?.end({ outcome: error instanceof SuspendSignal ? 'suspended' : 'canceled', suspended: error instanceof SuspendSignal || undefined });
          throw error;
        }
        failures++;
        inAttempt++;
        const retry = policy !== undefined && inAttempt < policy.maxAttempts && isRetryable(error);
        span?.end({ outcome: retry ? 'retry' : 'failed', error });
        this.ctx.hooks.emit('onStepFailed', { ...hook, error, willRetry: retry, durationMs: Date.now() - startedAt });
        const delay = !retry ? 0 : error instanceof RetryAfterError ? Math.max(0, dueAt(error.delay, this.ctx.clock.now(), 'RetryAfterError delay') - this.ctx.clock.now()) : stepRetryDelayMs(policy, inAttempt);
        const retryAt = retry && delay >= SLOT_FREEING_RETRY_MS ? this.ctx.clock.now() + delay : 0;
        this.record(triesField, encodeTriesRecord({ failures, runAttempt: this.ctx.attempt, failuresInRunAttempt: inAttempt, retryAt }, serializeError(error)));
        if (!retry) this.failAt(field, startedAt, error);
        if (retryAt === 0) {
          await this.pause(delay);
          continue;
        }
        // A long wait frees the slot: the failed try is stored, and the run sleeps until retryAt.
        const finishedAt = Date.now();
        this.record(field, encodeFailureRecord(++this.seq, this.ctx.attempt, finishedAt, finishedAt - startedAt, serializeError(error)));
        this.suspend(retryAt);
      }
    }
  }

  /**
   * Checks a step's `compensate` option and keeps the function under the step's name, whether the
   * step runs now or is replayed: a failing run compensates from this map. True when it has one.
   */
  private registerCompensation(name: string, opts: RunStepOptions): boolean {
    if (opts.compensate === undefined) {
      if (opts.compensateRetries !== undefined) throw new ConfigurationError(`Step "${name}" has compensateRetries but no compensate function: add compensate, or drop compensateRetries.`);
      return false;
    }
    if (typeof opts.compensate !== 'function') {
      throw new ConfigurationError(`The compensate option of step "${name}" must be a function (output, ctx) => ..., got ${typeof opts.compensate}.`);
    }
    const retries = checkStepRetry(opts.compensateRetries ?? DEFAULT_COMPENSATE_RETRIES, `compensateRetries of step "${name}"`);
    this.compensations.set(name, { fn: opts.compensate as RegisteredCompensation['fn'], retries });
    return true;
  }

  /**
   * `step.commit(name)`: every compensation due so far (stored, or written by this attempt) becomes
   * final (`c:<step>` = "x") in one checkpoint with the commit's own step record, after every earlier
   * step is stored. Steps that complete after it stay compensable.
   */
  private async commit(options: string): Promise<void> {
    const { field, record } = this.begin('commit', options);
    if (record?.kind === 'succeeded') return;
    await this.ready();
    for (const [key, value] of this.journal()) {
      if (key.startsWith(COMPENSATION_FIELD_PREFIX) && value === COMPENSATION_PENDING) this.record(key, COMPENSATION_COMMITTED);
    }
    const now = Date.now();
    this.record(field, encodeSuccessRecord(++this.seq, this.ctx.attempt, now, 0, ''));
    await this.durable();
  }

  /** The run's journal as this attempt leaves it: the stored fields with every field it wrote over them. */
  journal(): Map<string, string> {
    const all = new Map(this.stored);
    for (const [field, value] of this.written) all.set(field, value);
    return all;
  }

  /** In a replay that only collects compensations, reaching anything new ends the replay. */
  private endReplay(): void {
    if (this.replayOnly) throw new ReplayEndSignal(`The replay of run "${this.ctx.runId}" reached a step that did not complete.`);
  }

  /** Waits `ms` in process (a short step retry delay); rejects when the attempt must stop. */
  private pause(ms: number): Promise<void> {
    if (ms <= 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      const step: InflightStep = {
        reject: (reason) => {
          cancel();
          this.inflight.delete(step);
          reject(reason);
        },
      };
      const cancel = this.ctx.clock.setTimer(ms, () => {
        this.inflight.delete(step);
        resolve();
      });
      this.inflight.add(step);
    });
  }

  /**
   * Stores a run field that is not a step (progress, a published value) with the next checkpoint,
   * which is sent now. Resolves once it is stored.
   */
  private setField(field: string, value: unknown, what: string, limit: number): Promise<void> {
    if (this.replayOnly) return Promise.resolve();
    let json: string;
    try {
      this.throwIfStopped();
      json = encodeJson(value, what, limit);
    } catch (error) {
      if (error instanceof PayloadTooLargeError && field === PROGRESS_FIELD) {
        return Promise.reject(new PayloadTooLargeError(what, error.bytes, error.limit, 'Progress is for small values (a count, a percentage, a phase): store large data elsewhere.'));
      }
      return Promise.reject(error);
    }
    this.record(field, json === '' ? 'null' : json);
    const stored = this.durable();
    stored.catch(noop); // an unawaited call must not become an unhandled rejection
    return stored;
  }

  private async waitFor(options: StepOptions | string, target: Duration | Date): Promise<void> {
    const { field, name, record } = this.begin('waitFor', options);
    const what = `waitFor target of step "${name}"`;
    let wakeAt: number;
    if (record?.kind === 'sleeping') {
      wakeAt = record.wakeAt;
    } else if (record?.kind === 'succeeded') {
      return;
    } else {
      this.endReplay();
      if (this.guard?.pending) await this.guard.verify();
      this.throwIfStopped();
      wakeAt = target instanceof Date ? timeOption(target, what) : this.ctx.clock.now() + toMs(target, what);
      this.record(field, encodeSleepRecord(++this.seq, this.ctx.attempt, wakeAt));
    }
    if (this.ctx.clock.now() >= wakeAt) return;
    this.suspend(wakeAt);
  }

  private async waitForSignal(options: StepOptions | string, signal: string, waitOptions: WaitForSignalOptions = {}): Promise<unknown> {
    const { name, field, record } = this.begin('waitForSignal', options);
    checkUserName(signal, `The signal name of step "${name}"`);
    assertKnownKeys(`step.waitForSignal options of step "${name}"`, waitOptions, WAIT_FOR_SIGNAL_OPTION_KEYS);
    return this.awaitExternal('signal', record, waitOptions.timeout, name, field, (target, deadline) => this.ctx.scripts.waitSignal(target, signal, deadline, this.ctx.clock.now()));
  }

  /**
   * A wait for something from outside the run (a signal or an event): the
   * stored payload on replay; else the script consumes it, records the timeout, or records the
   * wait, and the run suspends until it comes or the deadline passes.
   */
  private async awaitExternal(
    kind: 'signal' | 'event',
    record: StoredStep | undefined,
    timeout: Duration | undefined,
    name: string,
    field: string,
    script: (target: StepTarget, deadline: number) => Promise<{ code: 'lost' | 'got' | 'timeout' | 'wait'; record: string }>,
  ): Promise<unknown> {
    if (record?.kind === 'succeeded') return record.output ?? null;
    await this.ready();
    const deadline = record?.kind === kind ? record.deadline : timeout === undefined ? 0 : this.ctx.clock.now() + toMs(timeout, `timeout of step "${name}"`);
    const result = await this.ctx.call(() => script(this.target(field), deadline));
    if (result.code === 'lost') this.lost();
    if (result.code === 'wait') this.suspend(deadline, field);
    const stored = decodeStepRecord(this.ctx.runId, field, result.record);
    return stored.kind === 'succeeded' ? (stored.output ?? null) : null;
  }

  private async waitForEvent(options: StepOptions | string, event: string, waitOptions: WaitForEventOptions = {}): Promise<unknown> {
    const { name, field, record } = this.begin('waitForEvent', options);
    checkEventName(event, `The event name of step "${name}"`);
    assertKnownKeys(`step.waitForEvent options of step "${name}"`, waitOptions, WAIT_FOR_EVENT_OPTION_KEYS);
    const match = matchKey(waitOptions.match, `the match of step "${name}"`);
    return this.awaitExternal('event', record, waitOptions.timeout, name, field, (target, deadline) => this.ctx.scripts.waitEvent(target, event, deadline, this.ctx.clock.now(), match));
  }

  /**
   * `step.waitForAny`: the stored winner on replay; else the children of child branches start (once:
   * their ids are deterministic) and `wait-any` decides the race if a branch is ready, or records
   * and registers it, and the run suspends until a branch wins (a signal or a child's end, written
   * by `signal` / `notify_waiters`) or its earliest timer is due. A winner found next to the race's
   * branches field was written while the run waited: `wait-any` ends the race (unregisters the
   * branches, cancels or abandons losing children) before the step returns it.
   */
  private async waitForAny(options: StepOptions | string, branches: unknown): Promise<unknown> {
    const { name, field, record } = this.begin('waitForAny', options);
    const what = `step.waitForAny "${name}"`;
    const specs = raceBranches(branches, what);
    const signals = new Map<string, string>();
    for (const [key, spec] of specs) {
      checkUserName(key, `A branch key of ${what}`, STEP_NAME_RULES);
      if (spec.kind === 'signal') {
        checkUserName(spec.signal, `The signal name of branch "${key}" of ${what}`);
        const other = signals.get(spec.signal);
        if (other !== undefined) throw new ConfigurationError(`Branches "${other}" and "${key}" of ${what} both wait for signal "${spec.signal}": give each signal one branch.`);
        signals.set(spec.signal, key);
      }
      if (spec.kind === 'event') checkEventName(spec.event, `The event name of branch "${key}" of ${what}`);
    }
    // A winner next to the branches field: the race is not over until the lease holder ends it
    // (a compensating replay writes nothing, so it takes the winner as it is).
    const pending = this.stored.has(RACE_FIELD_PREFIX + name) && !this.replayOnly;
    if (!pending && record?.kind === 'succeeded') return record.output;
    if (!pending && record?.kind === 'failed') throw deserializeError(JSON.stringify(record.error));
    if (record && record.kind !== 'race' && record.kind !== 'succeeded' && record.kind !== 'failed') {
      throw new CorruptRunDataError(this.ctx.runId, `field "${field}" holds a ${record.kind} record, not the race of step.waitForAny "${name}"`);
    }
    await this.ready();
    const target = this.target(field);
    let race: { record: string; branches: string } | undefined;
    if (record === undefined) {
      const now = this.ctx.clock.now();
      const dues = new Map<string, number>();
      for (const [key, spec] of specs) {
        if (spec.kind === 'timer') dues.set(key, spec.target instanceof Date ? timeOption(spec.target, `timer of branch "${key}" of ${what}`) : now + toMs(spec.target, `timer of branch "${key}" of ${what}`));
      }
      const stored: RaceBranchRecord[] = [];
      for (const [key, spec] of specs) {
        if (spec.kind === 'signal') stored.push([key, 's', spec.signal]);
        else if (spec.kind === 'timer') stored.push([key, 't', dues.get(key)!]);
        else if (spec.kind === 'event') {
          const { shape, hash } = matchKey(spec.match, `the match of branch "${key}" of ${what}`);
          stored.push([key, 'e', spec.event, shape, hash]);
        }
        else stored.push([key, 'c', await this.startRaceChild(target, name, key, spec), spec.onLose]);
      }
      race = encodeRaceRecord(target.seq, this.ctx.attempt, dues.size ? Math.min(...dues.values()) : 0, stored);
    }
    const result = await this.ctx.call(() => this.ctx.scripts.waitAny(target, this.ctx.clock.now(), race));
    if (result.code === 'lost') this.lost();
    if (result.code === 'corrupt') throw new CorruptRunDataError(this.ctx.runId, `field "${field}" or "${RACE_FIELD_PREFIX}${name}" is not the race of step.waitForAny "${name}"`);
    const stored = decodeStepRecord(this.ctx.runId, field, result.record);
    if (stored.kind === 'race') this.suspend(stored.deadline, field);
    if (stored.kind === 'succeeded') return stored.output;
    if (stored.kind === 'failed') throw deserializeError(JSON.stringify(stored.error));
    throw new CorruptRunDataError(this.ctx.runId, `field "${field}" holds a ${stored.kind} record after the race of step.waitForAny "${name}"`);
  }

  /** Starts (or finds, on a replay) the child run of a waitForAny branch; returns its id. */
  private async startRaceChild(target: StepTarget, name: string, key: string, spec: Extract<RaceBranchSpec, { kind: 'child' }>): Promise<string> {
    const { result } = await this.callStartChild({
      step: target,
      mode: 'race',
      childId: `${this.ctx.runId}.${name}.${key}`,
      workflow: spec.workflow,
      input: spec.input,
      what: `branch "${key}" of step "${name}"`,
      runAt: 0,
      idempotencyKey: '',
      idempotencyTtlSec: 1,
      deadline: 0,
    });
    return result.childId;
  }

  /**
   * Starts (or finds) a child run, validated against its definition when this process has it, on
   * the queue of that definition's version: what `step.runWorkflow`, `step.emitWorkflow` and the
   * child branches of `step.waitForAny` share. Throws for a lost lease, an unknown workflow or a
   * flow-control key this process cannot compute.
   */
  private async callStartChild(a: {
    step: StepTarget;
    mode: 'wait' | 'emit' | 'race';
    childId: string;
    workflow: WorkflowTarget;
    input: unknown;
    what: string;
    runAt: number;
    idempotencyKey: string;
    idempotencyTtlSec: number;
    deadline: number;
  }) {
    const definition = typeof a.workflow === 'string' ? this.ctx.registry.get(a.workflow) : a.workflow;
    const workflowName = typeof a.workflow === 'string' ? a.workflow : a.workflow.name;
    if (definition) await validateInput(workflowName, definition.options.schema, a.input);
    const flow = flowControlFor(definition as Parameters<typeof flowControlFor>[0], a.input);
    const result = await this.ctx.call(() => this.ctx.scripts.startChild({
      step: a.step,
      now: this.ctx.clock.now(),
      mode: a.mode,
      childId: a.childId,
      workflow: workflowName,
      queue: definition ? versionQueue(definition.queue, definition.version) : '',
      maxAttempts: definition ? String(definition.maxAttempts) : '',
      input: encodeInput(workflowName, a.input, `The input of child workflow "${workflowName}" (${a.what})`, this.ctx.maxPayloadBytes),
      runAt: a.runAt,
      idempotencyKey: a.idempotencyKey,
      idempotencyTtlSec: a.idempotencyTtlSec,
      deadline: a.deadline,
      localFlow: definition !== undefined,
      debounce: flow.debounce,
      extra: this.withTrace(flow.extra),
    }));
    if (result.code === 'lost') this.lost();
    if (result.code === 'unknown') throw this.ctx.registry.unknownWorkflow(workflowName);
    if (result.code === 'dynamic') throw dynamicFlowError(workflowName);
    return { result, workflowName };
  }

  /** A child run's extra fields with the active trace context (the attempt's or a step's span), when tracing is on. */
  private withTrace(extra: string[]): string[] {
    const trace = this.ctx.tracing?.inject();
    return trace ? [...extra, ...traceFields(trace)] : extra;
  }

  private async startChild(mode: 'wait' | 'emit', options: ChildRunOptions | string, workflow: WorkflowTarget, input: unknown): Promise<unknown> {
    const api = mode === 'wait' ? 'runWorkflow' : 'emitWorkflow';
    const { opts, name, field, record } = this.begin<ChildRunOptions>(api, options, CHILD_RUN_OPTION_KEYS);
    if (record?.kind === 'succeeded') return record.output;
    if (record?.kind === 'child') {
      const deadline = record.deadline;
      if (deadline && this.ctx.clock.now() >= deadline) this.failAt(field, this.ctx.clock.now(), new TimeoutError(`Waiting for child run "${record.childRunId}" of step "${name}"`, opts.timeoutMs ?? 0));
      this.suspend(deadline, field);
    }
    await this.ready();
    const deadline = mode === 'wait' && opts.timeoutMs !== undefined ? this.ctx.clock.now() + opts.timeoutMs : 0;
    const { result, workflowName } = await this.callStartChild({
      step: this.target(field),
      mode,
      childId: `${this.ctx.runId}.${name}`,
      workflow,
      input,
      what: `step "${name}"`,
      runAt: timeOption(opts.runAt, 'runAt'),
      idempotencyKey: opts.idempotencyKey === undefined ? '' : checkIdempotencyKey(opts.idempotencyKey, `idempotencyKey of step "${name}"`),
      idempotencyTtlSec: idempotencyTtlSec(opts.idempotencyTtl),
      deadline,
    });
    if (result.code === 'conflict') throw new IdempotencyConflictError(workflowName, opts.idempotencyKey!, result.childId);
    if (mode === 'emit') return result.childId;
    const stored = decodeStepRecord(this.ctx.runId, field, result.record);
    if (stored.kind === 'child') this.suspend(deadline, field);
    if (stored.kind === 'succeeded') return stored.output;
    if (stored.kind === 'failed') throw deserializeError(JSON.stringify(stored.error));
    throw new CorruptRunDataError(this.ctx.runId, `field "${field}" holds a ${stored.kind} record after its child run started`);
  }

  private async emitEvent(options: EmitEventStepOptions | string, event: string, payload: unknown): Promise<string[]> {
    const { opts, name, field, record } = this.begin<EmitEventStepOptions>('emitEvent', options, EMIT_EVENT_STEP_OPTION_KEYS);
    checkEventName(event, `The event name of step "${name}"`);
    if (record?.kind === 'succeeded') return record.output as string[];
    await this.ready();
    const result = await this.ctx.call(() => this.ctx.scripts.emitEvent({
      eventId: `${this.ctx.runId}.${name}`,
      event,
      payload: encodeJson(payload, `The payload of event "${event}" (step "${name}")`, this.ctx.maxPayloadBytes),
      fields: eventFields(payload),
      now: this.ctx.clock.now(),
      emitAt: timeOption(opts.emitAt, 'emitAt'),
      idempotencyKey: '',
      idempotencyTtlSec: 1,
      step: this.target(field),
    }));
    if (result.code === 'lost') this.lost();
    return result.runIds;
  }

  /** Before a step's effect: the attempt must go on, and every earlier step must be stored. */
  private async ready(): Promise<void> {
    this.endReplay();
    // A new step where the journal has another one: nothing of it runs (NonDeterminismError).
    if (this.guard?.pending) await this.guard.verify();
    this.throwIfStopped();
    await this.durable();
    this.throwIfStopped();
  }

  private target(field: string): StepTarget {
    return { runId: this.ctx.runId, token: this.ctx.token, field, seq: ++this.seq, attempt: this.ctx.attempt };
  }

  private lost(): never {
    this.ctx.onLost('lost');
    throw this.ctx.stopReason() ?? new CanceledError(this.ctx.runId, 'this worker no longer holds the run');
  }

  /**
   * Ends the attempt here: the run waits until `dueAt` (0 = until a child wakes it). Parallel
   * waits (Promise.all) combine: the earliest due time, and every awaited child step.
   */
  private suspend(dueAt: number, waitField?: string): never {
    this.endReplay();
    const signal = new SuspendSignal(`Run "${this.ctx.runId}" is waiting.`);
    const current = this.suspension;
    if (!current) {
      this.suspension = { dueAt, waitFields: waitField ? [waitField] : [] };
      this.interrupt(signal);
    } else {
      if (dueAt > 0 && (current.dueAt === 0 || dueAt < current.dueAt)) current.dueAt = dueAt;
      if (waitField) current.waitFields.push(waitField);
    }
    throw signal;
  }

  /** Records a step failure (the first one fails fast its running siblings) and throws it. */
  private failAt(field: string, startedAt: number, error: unknown): never {
    this.recordFailure(field, startedAt, error);
    throw error;
  }

  private recordFailure(field: string, startedAt: number, error: unknown): void {
    if (error instanceof SiblingStepFailedError || error instanceof CanceledError || error instanceof SuspendSignal || this.failure !== undefined) return;
    this.failure = error;
    const finishedAt = Date.now();
    this.record(field, encodeFailureRecord(++this.seq, this.ctx.attempt, finishedAt, finishedAt - startedAt, serializeError(error)));
    const sibling = new SiblingStepFailedError(`A parallel step of step "${field.slice(STEP_FIELD_PREFIX.length)}" failed.`);
    for (const other of this.inflight) this.stop(other, sibling);
  }

  /**
   * Runs a step's function once; stores its record when it returns (the caller handles a throw).
   * With `heartbeatMs`, the try fails with `StepHeartbeatTimeoutError` once that long passes (real
   * time, like `timeoutMs`) without a `heartbeat()` call.
   */
  private async execute<T>(name: string, field: string, timeoutMs: number | undefined, heartbeatMs: number | undefined, fn: (ctx: StepRunContext) => T | Promise<T>, compensable = false): Promise<T> {
    const startedAt = Date.now();
    const step: InflightStep = { reject: noop };
    let heartbeatTimer: NodeJS.Timeout | undefined;
    let running = false;
    const heartbeat =
      heartbeatMs === undefined
        ? noop
        : () => {
            if (!running) return;
            clearTimeout(heartbeatTimer);
            heartbeatTimer = setTimeout(() => this.stop(step, new StepHeartbeatTimeoutError(name, heartbeatMs)), heartbeatMs);
          };
    // The signal is created only if the step function reads it: most steps never do.
    const stepContext: StepRunContext = {
      get signal(): AbortSignal {
        return (step.controller ??= new AbortController()).signal;
      },
      heartbeat,
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      const mock = this.ctx.stepMocks && (await this.ctx.stepMocks(this.ctx.runId, name));
      // A step runs only under a lease this worker surely holds: after a blocked event loop,
      // another worker may have taken the run over and stored this step already.
      const renewing = this.ctx.confirmLease();
      if (renewing) await renewing;
      const result = await new Promise<T>((resolve, reject) => {
        step.reject = reject;
        this.inflight.add(step);
        if (timeoutMs !== undefined) timer = setTimeout(() => this.stop(step, new TimeoutError(`Step "${name}"`, timeoutMs)), timeoutMs);
        running = true;
        heartbeat();
        if (mock) {
          if ('output' in mock) resolve(mock.output as T);
          else reject(mock.error instanceof Error ? mock.error : new Error(String(mock.error)));
          return;
        }
        try {
          Promise.resolve(fn(stepContext)).then(resolve, reject);
        } catch (error) {
          reject(error);
        }
      });
      this.inflight.delete(step);
      const encoded = encodeJson(result, `The output of step "${name}"`, this.ctx.maxPayloadBytes);
      const finishedAt = Date.now();
      this.record(field, encodeSuccessRecord(++this.seq, this.ctx.attempt, finishedAt, finishedAt - startedAt, encoded));
      // In the same batch as the step's record: a stored step is never without its compensation.
      if (compensable) this.record(COMPENSATION_FIELD_PREFIX + name, COMPENSATION_PENDING);
      return (encoded === '' ? undefined : JSON.parse(encoded)) as T;
    } catch (error) {
      this.inflight.delete(step);
      throw error;
    } finally {
      running = false;
      clearTimeout(timer);
      clearTimeout(heartbeatTimer);
    }
  }

  private stop(step: InflightStep, reason: unknown): void {
    step.controller?.abort(reason);
    step.reject(reason);
  }

  private throwIfStopped(): void {
    const reason = this.ctx.stopReason();
    if (reason) throw reason;
    if (this.suspension) throw new SuspendSignal(`Run "${this.ctx.runId}" is waiting.`);
    if (this.closed) throw new ConfigurationError(`Run "${this.ctx.runId}" already ended: a step was started after the handler returned. Await every step.`);
  }

  private record(field: string, json: string): void {
    if (this.closed || this.replayOnly) return;
    this.pending.push(field, json);
    this.written.set(field, json);
    if (!this.flushQueued) {
      this.flushQueued = true;
      // Handlers that return right after their last step carry its record in the finish script;
      // one that goes on with other work gets it written on the next turn of the event loop.
      setImmediate(() => {
        this.flushQueued = false;
        if (!this.closed && this.pending.length) void this.durable().catch(noop);
      });
    }
  }

  /** Resolves when every completed step of this attempt is stored. */
  private async durable(): Promise<void> {
    if (this.pending.length) {
      const records = this.pending;
      this.pending = [];
      this.flushing = this.flushing.then(async () => {
        if (this.flushError) return;
        try {
          const code = await this.ctx.call(() => this.ctx.scripts.checkpoint(this.ctx.runId, this.ctx.token, this.ctx.clock.now(), records));
          if (code !== 'ok') this.ctx.onLost(code);
        } catch (error) {
          // Keep the records: the attempt now fails, and its finish call stores them.
          this.pending.unshift(...records);
          this.flushError = error;
        }
      });
    }
    await this.flushing;
    if (this.flushError) throw this.flushError;
  }
}
