import { cancelOnKeys } from '../definition/event-match';
import { checkStepRetry, parseVersionQueue, type CheckedStepRetry } from '../definition/option-checks';
import type { GuardedSpan } from '../definition/tracing';
import { validateInput } from '../definition/validation';
import type { RunInfo } from '../definition/workflow';
import type { CancelOnTrigger, WorkflowDefinition } from '../definition/workflow-types';
import { CanceledError, CorruptRunDataError, NonDeterminismError, RunTerminatedError, RunTimeoutError } from '../errors';
import type { ClaimedRun } from '../store/redis-scripts';
import { readTraceContext } from '../store/run-record';
import { encodeJson, serializeError } from '../store/serialization';
import { isJournalField } from '../store/step-record';
import { AttemptFinisher, type FinishedAttempt } from './attempt-finisher';
import { AttemptState, withinDeadline } from './attempt-state';
import { JOURNAL_LARGE_FIELD } from './checkpoint-writer';
import { compensate, type CompensatingAttempt } from './compensation-phase';
import { dueCompensations } from './compensations';
import type { ExecutorHost } from './executor-host';
import { decideFailure, notAfterDeadline, readThrown, type FailureFacts } from './failure-decision';
import { StepRuntime, type AttemptContext } from './step-runtime';

export type { ExecutorHost } from './executor-host';

/**
 * Executes one claimed attempt of a run: validates, runs the handler with the step runtime, and
 * ends the attempt with one finish call (which also claims the worker's next run). What ends a
 * failed attempt is decided in failure-decision.ts; each ending is carried out by
 * attempt-finisher.ts; the stop state (timed out, halted, abandoned) is attempt-state.ts.
 */
export class RunExecutor implements FinishedAttempt, CompensatingAttempt {
  readonly runId: string;
  readonly token: string;
  readonly queue: string;
  /** Running, timed out, halted or abandoned: see attempt-state.ts. */
  readonly state = new AttemptState((reason) => this.steps?.interrupt(reason));
  /** When the run's timeout passes (workflow time, from its first claim); 0 = no timeout. */
  private readonly deadline: number;
  private steps: StepRuntime | undefined;
  /** When the attempt started (ms, real time). */
  readonly startedAt = Date.now();
  /** The attempt's span, when tracing is on. */
  private span: GuardedSpan | undefined;
  /** @internal Ends the attempt, one way or another. */
  readonly finisher: AttemptFinisher;
  private lossReported = false;
  /**
   * Until when the lease is surely this attempt's (ms, real time): the expiry the claim or the
   * last heartbeat asked for, each computed before its call was sent. Checkpoints do not extend
   * a lease; only the claim and heartbeats do.
   */
  private leaseUntil: number;

  constructor(
    private readonly host: ExecutorHost,
    private readonly claimed: ClaimedRun,
  ) {
    this.runId = claimed.runId;
    this.token = claimed.token;
    this.leaseUntil = claimed.leaseUntil;
    this.queue = claimed.hash.queue ?? '';
    this.deadline = Number(claimed.hash.deadline) || 0;
    this.finisher = new AttemptFinisher(host, this);
  }

  /** A heartbeat renewed the lease until `until` (computed before the heartbeat was sent). */
  leaseRenewed(until: number): void {
    if (until > this.leaseUntil) this.leaseUntil = until;
  }

  /**
   * Called before a step's (or a compensation's) function runs: the lease must still be this
   * attempt's, or another worker may have taken the run over (this worker's event loop was
   * blocked past the lease) and stored the step already. While more than a third of a lease is
   * left (heartbeats come every third), nothing is sent and undefined is returned; else the lease
   * is renewed first, and the promise rejects with the stop reason when it was lost.
   */
  confirmLease(): Promise<void> | undefined {
    if (Date.now() < this.leaseUntil - this.host.leaseMs / 3) return undefined;
    return this.redisCall(() => this.host.renewLease(this)).then(() => {
      const stopped = this.state.stopReason ?? this.state.halted;
      if (stopped) throw stopped;
    });
  }

  /** Stops the handler's work: the run was canceled or this worker no longer holds it. */
  abort(reason: string): void {
    const error = new CanceledError(this.runId, reason);
    this.state.halt(error);
    if (this.state.stopReason) return;
    if (reason === 'canceled')
      this.host.hooks.emit('onRunCanceled', { runId: this.runId, workflow: this.claimed.hash.workflow, attempt: Number(this.claimed.hash.attempt) });
    this.state.stopHandler(error);
  }

  /**
   * The run was terminated (`terminate`): it stops as a canceled one does, its signal aborting
   * with RunTerminatedError; running compensations stop too.
   */
  terminated(): void {
    const error = new RunTerminatedError(this.runId);
    this.state.halt(error);
    this.state.stopHandler(error);
  }

  /** FinishedAttempt: this attempt found its lease gone; the worker is told once per attempt (it says why, if it knows). */
  leaseLost(): void {
    if (this.lossReported) return;
    this.lossReported = true;
    this.host.leaseLost(this.runId, this.startedAt);
  }

  /** The run was canceled or terminated, or another worker holds it now. */
  lost(code: 'canceled' | 'terminated' | 'lost'): void {
    if (code === 'terminated') return this.terminated();
    if (code === 'lost' && !this.state.stopReason) this.leaseLost();
    this.abort(code === 'canceled' ? 'canceled' : 'another worker took over the run');
  }

  /**
   * A call that must reach Redis for the run to go on (a checkpoint, a finish, a child start):
   * while Redis is unreachable or refuses writes, it waits for Redis and tries again with the
   * same lease token, so a refused write costs neither an attempt nor a recovery. The scripts
   * check the token, so a retry after the lease was taken over is answered 'lost'.
   */
  async redisCall<T>(fn: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await fn();
      } catch (error) {
        if (this.state.abandoned || !this.host.health.report(error)) throw error;
        await this.host.waitForRedis();
        if (this.state.abandoned || !this.host.health.healthy) throw error;
      }
    }
  }

  /** Stops the handler's work and leaves the run to be recovered by another worker's reaper. */
  abandon(): void {
    this.state.abandon();
    this.abort('the worker stopped before the run finished; it will be resumed by another worker');
  }

  /** Runs the attempt; resolves with the next claimed run, if the finish call claimed one. */
  async execute(): Promise<ClaimedRun | null> {
    const { hash } = this.claimed;
    const info: RunInfo = {
      id: this.runId,
      workflow: hash.workflow,
      queue: this.queue,
      attempt: Number(hash.attempt),
      maxAttempts: Number(hash.maxAttempts),
    };
    if (!this.host.tracing) return this.attempt(info);
    this.span = this.host.tracing.startAttempt({
      runId: this.runId,
      workflow: info.workflow,
      queue: info.queue,
      attempt: info.attempt,
      parent: readTraceContext(hash),
    });
    try {
      return await this.attempt(info);
    } finally {
      this.span?.end(this.finisher.outcome);
    }
  }

  private async attempt(info: RunInfo): Promise<ClaimedRun | null> {
    const { hash } = this.claimed;
    let input: unknown;
    try {
      if (!hash.workflow || !hash.queue || !(info.attempt >= 1) || !(info.maxAttempts >= 1)) {
        throw new CorruptRunDataError(this.runId, 'the run hash lacks a workflow, queue, attempt or maxAttempts field');
      }
      const definition = this.host.registry.get(info.workflow);
      if (!definition) throw this.host.registry.unknownWorkflow(info.workflow, `in worker "${this.host.app}", which serves queue "${info.queue}"`);
      if (hash.status === 'compensating') return await this.resumeCompensation(definition, info);
      // Another version's code must never run this run: it goes back, for a worker with its version.
      // (A compensating run, which only a worker on a version-1 queue shared with other versions
      // can meet, is compensated here: it holds no slot to wait in.)
      const runVersion = parseVersionQueue(info.queue).version;
      if (runVersion !== definition.version) return await this.finisher.handBack(info.queue, info.workflow, runVersion, definition.version);
      input = this.host.payloads.openInput(hash.input, { kind: 'input', runId: this.runId }, hash.batch === '1');
      const validInput = await validateInput(info.workflow, definition.options.schema, input);
      await this.registerCancelOn(definition.options.cancelOn, info.workflow, validInput);
      this.host.hooks.emit('onRunStart', {
        runId: this.runId,
        workflow: info.workflow,
        attempt: info.attempt,
        maxAttempts: info.maxAttempts,
        input: validInput,
      });

      const steps = (this.steps = new StepRuntime(this.attemptContext(info), this.storedJournal()));
      const handler = () => this.runHandler(definition, steps, info, validInput);
      // No timeout: the handler's own promise, with no wrapper on the hot path.
      const output = await (this.deadline ? withinDeadline(this.deadline, this.host.clock, this.state, () => this.timedOut(info), handler) : handler());
      if (steps.suspension) return this.suspend(info.queue, steps.suspension);
      steps.guard?.assertComplete();
      const outputJson = encodeJson(output, `The output of workflow "${info.workflow}"`, this.host.maxPayloadBytes);
      return await this.finisher.succeeded(info, output, this.host.payloads.seal(outputJson, { kind: 'output', runId: this.runId }));
    } catch (thrown) {
      await this.steps?.settled();
      const read = readThrown(thrown, { suspended: Boolean(this.steps?.suspension), stepFailure: this.steps?.failure, stopReason: this.state.stopReason });
      if (read.action === 'suspend') return this.suspend(info.queue, this.steps!.suspension!);
      return this.fail(read.error, info, input);
    }
  }

  /** A warning, and the `onJournalLarge` hook: the run's journal passed `journalWarningBytes`. */
  private journalLarge(info: RunInfo, bytes: number): void {
    const limit = this.host.journalWarningBytes;
    this.host.logger.warn(
      `Run "${this.runId}" of workflow "${info.workflow}" stores ${bytes} bytes of step records and values, more than journalWarningBytes (${limit}): every attempt reads them whole, and Redis keeps them until the run is deleted. Store less per step (ids instead of documents), or split the work into child runs.`,
    );
    this.host.hooks.emit('onJournalLarge', { runId: this.runId, workflow: info.workflow, attempt: info.attempt, bytes, limit });
  }

  /** How the steps of a workflow retry when they set no `retries`: its `stepRetries` (checked when defined), else the worker's. */
  private stepRetriesOf(workflow: string): CheckedStepRetry {
    const own = this.host.registry.get(workflow)?.options.stepRetries;
    return own === undefined ? this.host.defaultStepRetries : checkStepRetry(own, `stepRetries of workflow "${workflow}"`);
  }

  /** What the step runtime of this attempt needs; `stopReason` defaults to the attempt's. */
  attemptContext(info: RunInfo, stopReason: () => Error | undefined = () => this.state.stopReason): AttemptContext {
    return {
      runId: this.runId,
      workflow: info.workflow,
      token: this.token,
      attempt: info.attempt,
      hooks: this.host.hooks,
      leaseMs: this.host.leaseMs,
      clock: this.host.clock,
      stepMocks: this.host.stepMocks,
      maxPayloadBytes: this.host.maxPayloadBytes,
      payloads: this.host.payloads,
      stepRetries: this.stepRetriesOf(info.workflow),
      journalWarningBytes: this.host.journalWarningBytes,
      journalWarned: this.claimed.hash[JOURNAL_LARGE_FIELD] !== undefined,
      journalLarge: (bytes) => this.journalLarge(info, bytes),
      scripts: this.host.scripts,
      registry: this.host.registry,
      stopReason,
      onLost: (code) => this.lost(code),
      call: (fn) => this.redisCall(fn),
      confirmLease: () => this.confirmLease(),
      tracing: this.host.tracing,
      span: this.span,
    };
  }

  private timedOut(info: RunInfo): RunTimeoutError {
    return new RunTimeoutError(this.runId, info.workflow, Number(this.claimed.hash.timeout) || 0);
  }

  /** FinishedAttempt: the step records not stored yet. */
  takePendingRecords(): string[] {
    return this.steps ? this.steps.takePending() : [];
  }

  /** The journal fields of the claimed run hash (step records, journaled values...). */
  private storedJournal(): Map<string, string> {
    const stored = new Map<string, string>();
    const { hash } = this.claimed;
    for (const field in hash) if (isJournalField(field)) stored.set(field, hash[field]);
    return stored;
  }

  /** Calls the workflow's handler with the step API of `steps`. */
  runHandler(definition: WorkflowDefinition, steps: StepRuntime, info: RunInfo, input: unknown): Promise<unknown> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const executor = this;
    const scheduledAt = this.claimed.hash.scheduledAt;
    const context = {
      input,
      run: info,
      ...(scheduledAt && { scheduledAt: new Date(Number(scheduledAt)) }),
      step: steps.api,
      setEvent: (key: string, value: unknown) => steps.setEvent(key, value),
      get signal() {
        return executor.state.handlerSignal;
      },
    };
    return Promise.resolve(this.span ? this.span.activate(() => definition.handler(context)) : definition.handler(context));
  }

  /**
   * A claimed run that is `compensating` (its worker died during the compensations, or it was
   * canceled with `{ compensate: true }`): the compensations left run here, from the stored journal.
   */
  private async resumeCompensation(definition: WorkflowDefinition, info: RunInfo): Promise<ClaimedRun | null> {
    const { hash } = this.claimed;
    const reasonJson = hash.error || serializeError(new CorruptRunDataError(this.runId, 'the compensating run has no error field'));
    const target = hash.compensate === 'canceled' ? 'canceled' : 'failed';
    let input: unknown;
    try {
      input = this.host.payloads.openInput(hash.input, { kind: 'input', runId: this.runId }, hash.batch === '1');
    } catch (error) {
      return this.finisher.endCompensation(target, reasonJson, { ok: false, ran: [], step: '', error }, info, undefined);
    }
    return compensate(this, { definition, info, input, reasonJson, target, journal: this.storedJournal() });
  }

  /**
   * A run whose workflow has `cancelOn` registers its triggers (matched on its input) when its
   * first attempt starts; the run hash's `cancelOn` field says it is done.
   */
  private async registerCancelOn(triggers: readonly CancelOnTrigger[] | undefined, workflow: string, input: unknown): Promise<void> {
    if (!triggers?.length || this.claimed.hash.cancelOn) return;
    const keys = cancelOnKeys(workflow, triggers, input, this.host.payloads);
    const code = await this.redisCall(() => this.host.scripts.registerCancelOn(this.runId, this.token, keys));
    if (code === 'lost') {
      this.lost('lost');
      throw this.state.stopReason ?? new CanceledError(this.runId, 'this worker no longer holds the run');
    }
  }

  /** The run waits (a timer or a child), until no later than its deadline. */
  private suspend(queue: string, suspension: { dueAt: number; waitFields: string[] }): Promise<ClaimedRun | null> {
    return this.finisher.suspend(queue, notAfterDeadline(suspension.dueAt, this.deadline), suspension.waitFields);
  }

  /**
   * `onNonDeterminism: 'retry-latest'`: the run moves to the latest registered version and is
   * retried there at once; null when it already is on it.
   */
  private async retryOnLatest(error: NonDeterminismError, info: RunInfo): Promise<{ next: ClaimedRun | null } | null> {
    const latest = await this.redisCall(() => this.host.latestQueue(info.workflow));
    if (!latest || parseVersionQueue(latest).version <= parseVersionQueue(info.queue).version) return null;
    return { next: await this.finisher.moveToLatest(error, info, latest) };
  }

  /** The facts `decideFailure` needs about this attempt. */
  private failureFacts(error: unknown, info: RunInfo, latestTried: boolean): FailureFacts {
    const definition = this.host.registry.get(info.workflow);
    const { hash } = this.claimed;
    return {
      error,
      run: info,
      now: this.host.clock.now(),
      deadline: this.deadline,
      compensating: hash.status === 'compensating',
      compensationTarget: hash.compensate === 'canceled' ? 'canceled' : 'failed',
      halted: Boolean(this.state.halted),
      stopReason: this.state.stopReason,
      workflow: definition && {
        retries: definition.options.retries,
        onNonDeterminism: definition.options.onNonDeterminism,
        hasOnFailure: Boolean(definition.options.onFailure),
      },
      latestTried,
      compensationsDue: () => Boolean(this.steps && dueCompensations(this.runId, this.steps.journal()).length),
    };
  }

  /** The attempt failed: carries out what `decideFailure` says (retry, compensate or fail). */
  private async fail(thrown: unknown, info: RunInfo, input: unknown): Promise<ClaimedRun | null> {
    if (this.state.abandoned) return null;
    let decision = decideFailure(this.failureFacts(thrown, info, false));
    if (decision.action === 'move-to-latest') {
      const moved = await this.retryOnLatest(decision.error, info);
      if (moved) return moved.next;
      decision = decideFailure(this.failureFacts(thrown, info, true));
    }
    switch (decision.action) {
      case 'leave':
      case 'move-to-latest':
        return null;
      case 'end-compensation':
        // A compensating run this worker cannot replay (its workflow is not registered here, its hash
        // is damaged): it must not end as if compensated. It needs a person; resume retries it.
        return this.finisher.endCompensation(
          decision.target,
          this.claimed.hash.error || serializeError(decision.error),
          { ok: false, ran: [], step: '', error: decision.error },
          info,
          input,
        );
      case 'compensate':
        return this.failAndCompensate(decision.error, info, input);
      case 'retry':
      case 'fail':
        return this.finisher.retryOrFail(decision, info, input);
    }
  }

  /** Failed for good with compensations due: the run becomes `compensating`, and they run now. */
  private async failAndCompensate(error: unknown, info: RunInfo, input: unknown): Promise<ClaimedRun | null> {
    const journal = this.steps!.journal();
    const errorJson = serializeError(error);
    const result = await this.finisher.beginCompensation(error, errorJson, info);
    if (result.code !== 'ok') return result.next;
    return compensate(this, { definition: this.host.registry.get(info.workflow)!, info, input, reasonJson: errorJson, target: 'failed', journal });
  }
}
