import { checkUserName } from '../definition/option-checks';
import type { StepApi } from '../definition/workflow-types';
import { CanceledError, ConfigurationError, PayloadTooLargeError } from '../errors';
import type { StepTarget } from '../store/redis-scripts';
import { encodeJson, serializeError } from '../store/serialization';
import { encodeFailureRecord, PROGRESS_FIELD, STEP_FIELD_PREFIX, VALUE_FIELD_PREFIX } from '../store/step-record';
import type { AttemptContext } from './attempt-context';
import { CheckpointWriter, journalBytes } from './checkpoint-writer';
import type { JournalGuard } from './journal-guard';
import { stopStep, type InflightStep, type RegisteredCompensation, type StepHost } from './step-host';
import { StepJournal } from './step-journal';
import { SiblingStepFailedError, SuspendSignal } from './step-signals';
import { buildStepApi } from './steps';

export { STEP_FIELD_PREFIX };
export type { AttemptContext, StepMock, StepMocks } from './attempt-context';
export type { RegisteredCompensation } from './step-host';
export { ReplayEndSignal, SiblingStepFailedError, SuspendSignal } from './step-signals';
export { MAX_PROGRESS_BYTES } from './steps/progress';

const noop = () => undefined;

/**
 * The durable step API of one attempt. Completed steps come from the run hash loaded by the claim
 * (no round trip): the journal (`step-journal.ts`) replays them. A new step's record goes to the
 * write buffer (`checkpoint-writer.ts`), which stores it with the next step or in the finish
 * script. `step.run` is `step-executor.ts`; every other step kind is a file under `steps/`, and
 * the `step` object is built from the table in `steps/index.ts`. What stays here is what belongs
 * to the attempt as a whole: suspension, interruption, the first failure, and effects in flight.
 */
export class StepRuntime implements StepHost {
  readonly api: StepApi;
  /** The first step error of this attempt: what the attempt reports when siblings were aborted. */
  failure: unknown;
  /** Set when the run must wait: the attempt ends with the `wait` outcome instead of its result. */
  suspension: { dueAt: number; waitFields: string[] } | undefined;
  readonly inflight = new Set<InflightStep>();
  /** The compensations of the steps reached so far, by step name. */
  readonly compensations = new Map<string, RegisteredCompensation>();
  readonly writer: CheckpointWriter;
  readonly replay: StepJournal;
  /** The non-determinism guard of a replay (none for a run without steps, or a compensation replay). */
  readonly guard: JournalGuard | undefined;
  private readonly effects = new Set<Promise<unknown>>();

  /**
   * `replayOnly`: a replay that only collects the compensations of completed steps (a compensating
   * run): stored results come back as usual, and the first step that did not complete ends the
   * replay (`ReplayEndSignal`) without running anything or writing anything.
   */
  constructor(
    readonly ctx: AttemptContext,
    stored: Map<string, string>,
    private readonly replayOnly = false,
  ) {
    this.writer = new CheckpointWriter(ctx, replayOnly, journalBytes(stored));
    this.replay = new StepJournal(ctx.runId, stored, replayOnly, this.writer, this, ctx.payloads);
    this.guard = this.replay.guard;
    this.api = buildStepApi(this);
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

  track<T>(effect: Promise<T>): Promise<T> {
    this.effects.add(effect);
    const done = () => this.effects.delete(effect);
    effect.then(done, done);
    return effect;
  }

  /** Stops every running step at once (their signals abort and their promises reject). */
  interrupt(reason: Error): void {
    for (const step of this.inflight) stopStep(step, reason);
  }

  /** Ends the attempt's step API and returns the records the finish script must write. */
  takePending(): string[] {
    return this.writer.takePending();
  }

  /** The run's journal as this attempt leaves it: the stored fields with every field it wrote over them. */
  journal(): Map<string, string> {
    return this.replay.current();
  }

  /**
   * Stores a run field that is not a step (progress, a published value) with the next checkpoint,
   * which is sent now. Resolves once it is stored.
   */
  setField(field: string, value: unknown, what: string, limit: number): Promise<void> {
    if (this.replayOnly) return Promise.resolve();
    let json: string;
    try {
      this.throwIfStopped();
      json = encodeJson(value, what, limit);
    } catch (error) {
      if (error instanceof PayloadTooLargeError && field === PROGRESS_FIELD) {
        const hint = 'Progress is for small values (a count, a percentage, a phase): store large data elsewhere.';
        return Promise.reject(new PayloadTooLargeError(what, error.bytes, error.limit, hint));
      }
      return Promise.reject(error);
    }
    const kind = field === PROGRESS_FIELD ? 'progress' : 'value';
    this.writer.record(field, json === '' ? 'null' : this.ctx.payloads.seal(json, { kind, runId: this.ctx.runId }));
    const stored = this.writer.durable();
    stored.catch(noop); // an unawaited call must not become an unhandled rejection
    return stored;
  }

  /** Before a step's effect: the attempt must go on, and every earlier step must be stored. */
  async ready(): Promise<void> {
    // A new step where the journal has another one: nothing of it runs (NonDeterminismError).
    const check = this.replay.reachNew();
    if (check) await check;
    this.throwIfStopped();
    await this.writer.durable();
    this.throwIfStopped();
  }

  target(field: string): StepTarget {
    return { runId: this.ctx.runId, token: this.ctx.token, field, seq: this.replay.nextSeq(), attempt: this.ctx.attempt };
  }

  lost(): never {
    this.ctx.onLost('lost');
    throw this.ctx.stopReason() ?? new CanceledError(this.ctx.runId, 'this worker no longer holds the run');
  }

  /**
   * Ends the attempt here: the run waits until `dueAt` (0 = until a child wakes it). Parallel
   * waits (Promise.all) combine: the earliest due time, and every awaited child step.
   */
  suspend(dueAt: number, waitField?: string): never {
    this.replay.endReplay();
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
  failAt(field: string, startedAt: number, error: unknown): never {
    this.recordFailure(field, startedAt, error);
    throw error;
  }

  private recordFailure(field: string, startedAt: number, error: unknown): void {
    if (error instanceof SiblingStepFailedError || error instanceof CanceledError || error instanceof SuspendSignal || this.failure !== undefined) return;
    this.failure = error;
    const finishedAt = Date.now();
    this.writer.record(field, encodeFailureRecord(this.replay.nextSeq(), this.ctx.attempt, finishedAt, finishedAt - startedAt, serializeError(error)));
    const sibling = new SiblingStepFailedError(`A parallel step of step "${field.slice(STEP_FIELD_PREFIX.length)}" failed.`);
    for (const other of this.inflight) stopStep(other, sibling);
  }

  throwIfStopped(): void {
    const reason = this.ctx.stopReason();
    if (reason) throw reason;
    if (this.suspension) throw new SuspendSignal(`Run "${this.ctx.runId}" is waiting.`);
    if (this.writer.closed) {
      throw new ConfigurationError(`Run "${this.ctx.runId}" already ended: a step was started after the handler returned. Await every step.`);
    }
  }
}
