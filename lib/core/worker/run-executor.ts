import { CanceledError, CorruptRunDataError, NonDeterminismError, RunTerminatedError, RunTimeoutError } from '../errors';
import { MAX_TIMER_MS } from '../definition/duration-format';
import { parseVersionQueue } from '../definition/option-checks';
import type { RedisHealth } from '../store/redis-health';
import type { ClaimedRun, FinishOutcome, FinishResult, RedisScripts } from '../store/redis-scripts';
import { decodeJson, deserializeError, encodeJson, serializeError } from '../store/serialization';
import { StepRuntime, type AttemptContext } from './step-runtime';
import { decideFailure, notAfterDeadline, readThrown, type FailureFacts } from './failure-decision';
import { dueCompensations, runCompensations } from './compensations';
import type { CompensationOutcome } from '../definition/step-types';
import type { WorkflowDefinition } from '../definition/workflow-types';
import { isJournalField } from '../store/step-record';
import type { RedflowLogger } from '../definition/logger';
import { validateInput } from '../definition/validation';
import type { RunInfo, WorkflowRegistry } from '../definition/workflow';
import type { CancelOnTrigger } from '../definition/workflow-types';
import { cancelOnKeys } from '../definition/event-match';
import type { HookRunner } from './hook-runner';
import type { Clock } from '../definition/clock';
import type { StepMocks } from './step-runtime';
import type { GuardedSpan, GuardedTracing, SpanOutcome } from '../definition/tracing';
import { readTraceContext } from '../store/run-record';

const noop = () => undefined;

/** What an executor needs from its worker. */
export interface ExecutorHost {
  readonly app: string;
  readonly scripts: RedisScripts;
  readonly registry: WorkflowRegistry;
  readonly leaseMs: number;
  /** Workflow time (due times); leases use real time. */
  readonly clock: Clock;
  /** @internal Test step mocks (`nestjs-redflow/testing`). */
  readonly stepMocks?: StepMocks;
  readonly maxPayloadBytes: number;
  readonly logger: RedflowLogger;
  /** False while the worker is stopping: finishing then claims no next run. */
  readonly claiming: boolean;
  /** Per list, the workflows whose runs a claim leaves there for another version; finishing a run of such a list claims no next run (the queue loop's claim does). */
  readonly claimSkips: ReadonlyMap<string, readonly string[]>;
  /** A lease token no other claim has used: the worker's id and a counter. */
  nextLeaseToken(): string;
  /** Called after a run was scheduled (retry, wait), so the worker can promote it on time. */
  runScheduled(queue: string, dueAt: number): void;
  /** Whether Redis is up; outages are reported to it. */
  readonly health: RedisHealth;
  /** The worker's lifecycle hooks. */
  readonly hooks: HookRunner;
  /** Resolves when Redis is healthy again, or the worker stopped for good. */
  waitForRedis(): Promise<void>;
  /** Renews this attempt's lease now (a heartbeat of this run alone); tells the executor if it is lost. */
  renewLease(executor: RunExecutor): Promise<void>;
  /** An attempt found its lease gone (taken over or canceled). */
  leaseLost(runId: string, attemptStartedAt: number): void;
  /** Tracing, when on: a span per attempt, child of the trace context stored with the run. */
  readonly tracing?: GuardedTracing;
  /** The queue of the latest registered version of a workflow (its registry entry), or null. */
  latestQueue(workflow: string): Promise<string | null>;
  /**
   * A run of a version this worker does not have was claimed from `list` (its workflow was defined
   * after the worker started): it is handed back (warned once), and later claims leave such runs.
   */
  versionMismatch(list: string, workflow: string, runVersion: number, ownVersion: number): void;
}

/** How long a run claimed by a worker without its version waits before it is offered again. */
const HAND_BACK_MS = 1_000;

/**
 * Executes one claimed attempt of a run: validates, runs the handler with the step runtime, and
 * ends the attempt with one finish call (which also claims the worker's next run).
 */
export class RunExecutor {
  readonly runId: string;
  readonly token: string;
  readonly queue: string;
  /** Created only if the handler reads `signal`. */
  private controller: AbortController | undefined;
  private stopReason: CanceledError | RunTerminatedError | RunTimeoutError | undefined;
  /** When the run's timeout passes (workflow time, from its first claim); 0 = no timeout. */
  private readonly deadline: number;
  private steps: StepRuntime | undefined;
  /** Set when the worker stops before the run ends: the run is left to the reaper, not finished. */
  private abandoned = false;
  private readonly startedAt = Date.now();
  /** The attempt's span (tracing on), and how the attempt ended, for it. */
  private span: GuardedSpan | undefined;
  /** Set when this worker must leave the run alone (canceled, lost, stopping): ends a compensation phase too. */
  private halted: CanceledError | RunTerminatedError | undefined;
  /** Aborts the compensations' signal when the worker must leave the run. */
  private compensationController: AbortController | undefined;
  private outcome: SpanOutcome = { outcome: 'abandoned' };
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
      if (this.stopReason) throw this.stopReason;
      if (this.halted) throw this.halted;
    });
  }

  /** Stops the handler's work: the run was canceled or this worker no longer holds it. */
  abort(reason: string): void {
    const error = new CanceledError(this.runId, reason);
    this.halt(error);
    if (this.stopReason) return;
    if (reason === 'canceled') this.host.hooks.emit('onRunCanceled', { runId: this.runId, workflow: this.claimed.hash.workflow, attempt: Number(this.claimed.hash.attempt) });
    this.stop(error);
  }

  /**
   * The run was terminated (`terminate`): it stops as a canceled one does, its signal aborting
   * with RunTerminatedError; running compensations stop too.
   */
  terminated(): void {
    const error = new RunTerminatedError(this.runId);
    this.halt(error);
    if (!this.stopReason) this.stop(error);
  }

  /** A run that timed out goes on to its compensations: only this stops them. */
  private halt(error: CanceledError | RunTerminatedError): void {
    if (this.halted) return;
    this.halted = error;
    this.compensationController?.abort(error);
  }

  private stop(reason: CanceledError | RunTerminatedError): void {
    this.stopReason = reason;
    this.controller?.abort(reason);
    this.steps?.interrupt(reason);
  }

  private get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.stopReason) this.controller.abort(this.stopReason);
    }
    return this.controller.signal;
  }

  /** The run was canceled or terminated, or another worker holds it now. */
  lost(code: 'canceled' | 'terminated' | 'lost'): void {
    if (code === 'terminated') return this.terminated();
    if (code === 'lost' && !this.stopReason) this.host.leaseLost(this.runId, this.startedAt);
    this.abort(code === 'canceled' ? 'canceled' : 'another worker took over the run');
  }

  /**
   * A call that must reach Redis for the run to go on (a checkpoint, a finish, a child start):
   * while Redis is unreachable or refuses writes, it waits for Redis and tries again with the
   * same lease token, so a refused write costs neither an attempt nor a recovery. The scripts
   * check the token, so a retry after the lease was taken over is answered 'lost'.
   */
  private async redisCall<T>(fn: () => Promise<T>): Promise<T> {
    for (;;) {
      try {
        return await fn();
      } catch (error) {
        if (this.abandoned || !this.host.health.report(error)) throw error;
        await this.host.waitForRedis();
        if (this.abandoned || !this.host.health.healthy) throw error;
      }
    }
  }

  /** Stops the handler's work and leaves the run to be recovered by another worker's reaper. */
  abandon(): void {
    this.abandoned = true;
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
    this.span = this.host.tracing.startAttempt({ runId: this.runId, workflow: info.workflow, queue: info.queue, attempt: info.attempt, parent: readTraceContext(hash) });
    try {
      return await this.attempt(info);
    } finally {
      this.span?.end(this.outcome);
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
      if (runVersion !== definition.version) return await this.handBack(info.queue, info.workflow, runVersion, definition.version);
      input = decodeJson(hash.input, this.runId, 'input');
      const validInput = await validateInput(info.workflow, definition.options.schema, input);
      await this.registerCancelOn(definition.options.cancelOn, info.workflow, validInput);
      const hooks = this.host.hooks;
      hooks.emit('onRunStart', { runId: this.runId, workflow: info.workflow, attempt: info.attempt, maxAttempts: info.maxAttempts, input: validInput });

      const steps = (this.steps = new StepRuntime(this.attemptContext(info), this.storedJournal()));
      const output = await this.withinDeadline(info, () => this.runHandler(definition, steps, info, validInput));
      if (steps.suspension) return this.suspend(info.queue, steps.suspension);
      steps.guard?.assertComplete();
      const encoded = encodeJson(output, `The output of workflow "${info.workflow}"`, this.host.maxPayloadBytes);
      const result = await this.finish('succeeded', encoded, 0);
      this.outcome = { outcome: result.code === 'ok' ? 'succeeded' : result.code };
      if (result.code === 'ok') hooks.emit('onRunComplete', { runId: this.runId, workflow: info.workflow, attempt: info.attempt, output, durationMs: Date.now() - this.startedAt });
      return result.next;
    } catch (thrown) {
      await this.steps?.settled();
      const read = readThrown(thrown, { suspended: Boolean(this.steps?.suspension), stepFailure: this.steps?.failure, stopReason: this.stopReason });
      if (read.action === 'suspend') return this.suspend(info.queue, this.steps!.suspension!);
      return this.fail(read.error, info, input);
    }
  }

  /** What the step runtime of this attempt needs; `stopReason` defaults to the attempt's. */
  private attemptContext(info: RunInfo, stopReason: () => Error | undefined = () => this.stopReason): AttemptContext {
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

  /** The journal fields of the claimed run hash (step records, journaled values...). */
  private storedJournal(): Map<string, string> {
    const stored = new Map<string, string>();
    const { hash } = this.claimed;
    for (const field in hash) if (isJournalField(field)) stored.set(field, hash[field]);
    return stored;
  }

  /** Calls the workflow's handler with the step API of `steps`. */
  private runHandler(definition: WorkflowDefinition, steps: StepRuntime, info: RunInfo, input: unknown): Promise<unknown> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const executor = this;
    const context = {
      input,
      run: info,
      step: steps.api,
      setEvent: (key: string, value: unknown) => steps.setEvent(key, value),
      get signal() {
        return executor.signal;
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
      input = decodeJson(hash.input, this.runId, 'input');
    } catch (error) {
      return this.endCompensation(target, reasonJson, { ok: false, ran: [], step: '', error }, info, undefined);
    }
    return this.compensate(definition, info, input, reasonJson, target, this.storedJournal());
  }

  /**
   * The compensation phase (saga), with the lease held and the run `compensating`: replays the
   * handler over `journal` without running anything new, to collect the compensate functions of
   * the completed steps, then runs the due ones in reverse order of completion and ends the run.
   */
  private async compensate(definition: WorkflowDefinition, info: RunInfo, input: unknown, reasonJson: string, target: 'failed' | 'canceled', journal: Map<string, string>): Promise<ClaimedRun | null> {
    const reason = deserializeError(reasonJson);
    // A run that timed out compensates all the same: only being halted (canceled, lost) stops this phase.
    const halted = () => this.halted;
    const controller = (this.compensationController = new AbortController());
    if (this.halted) controller.abort(this.halted);
    const replay = new StepRuntime(this.attemptContext(info, halted), journal, true);
    try {
      const validInput = await validateInput(info.workflow, definition.options.schema, input);
      await this.runHandler(definition, replay, info, validInput).catch(() => undefined);
      await replay.settled();
      // Parallel branches go on after the first one stops: let them reach their completed steps.
      for (let turn = 0, seen = -1; turn < 50 && seen !== replay.compensations.size; turn++) {
        seen = replay.compensations.size;
        await new Promise((resolve) => setImmediate(resolve));
      }
      const due = dueCompensations(this.runId, journal);
      const result = await runCompensations(
        {
          runId: this.runId,
          workflow: info.workflow,
          token: this.token,
          attempt: info.attempt,
          leaseMs: this.host.leaseMs,
          clock: this.host.clock,
          scripts: this.host.scripts,
          call: (fn) => this.redisCall(fn),
          confirmLease: () => this.confirmLease(),
          stopReason: halted,
          signal: controller.signal,
          onLost: (code) => this.lost(code),
        },
        due,
        replay.compensations,
        reason,
      );
      return await this.endCompensation(target, reasonJson, result, info, input);
    } catch (error) {
      if (this.halted || this.abandoned) return null;
      return this.endCompensation(target, reasonJson, { ok: false, ran: [], step: '', error }, info, input);
    }
  }

  /** Ends a compensating run: `target` when every compensation ran, else `compensation_failed`. */
  private async endCompensation(
    target: 'failed' | 'canceled',
    reasonJson: string,
    result: { ok: true; ran: string[] } | { ok: false; ran: string[]; step: string; error: unknown },
    info: RunInfo,
    input: unknown,
  ): Promise<ClaimedRun | null> {
    const hook = target === 'failed' && Boolean(this.host.registry.get(info.workflow)?.options.onFailure);
    const finished = result.ok
      ? await this.finish(target, reasonJson, 0, undefined, !hook, ['compensated', '1'])
      : await this.finish('compensation_failed', reasonJson, 0, undefined, !hook, ['compError', serializeError(result.error)]);
    this.outcome = finished.code !== 'ok' ? { outcome: finished.code } : { outcome: 'failed', error: result.ok ? deserializeError(reasonJson) : result.error };
    if (finished.code === 'ok' && hook) {
      const compensation: CompensationOutcome = result.ok ? { status: 'compensated', steps: result.ran } : { status: 'failed', steps: result.ran, error: result.error };
      await this.runOnFailure(deserializeError(reasonJson), info, input, compensation);
    }
    return finished.next;
  }

  /**
   * Runs the handler within the run's timeout: a run claimed past its deadline (a waiting run woken
   * by it, or a retry due after it) fails before its handler runs; one still running when the
   * deadline passes has its attempt aborted with `RunTimeoutError`, which fails it for good
   * through `fail()`, like any final failure.
   */
  private withinDeadline<T>(info: RunInfo, handler: () => Promise<T>): Promise<T> {
    // No timeout: the handler's own promise, with no wrapper on the hot path.
    return this.deadline ? this.raceDeadline(info, handler) : handler();
  }

  private async raceDeadline<T>(info: RunInfo, handler: () => Promise<T>): Promise<T> {
    const timeoutMs = Number(this.claimed.hash.timeout) || 0;
    const timedOut = () => new RunTimeoutError(this.runId, info.workflow, timeoutMs);
    if (this.host.clock.now() >= this.deadline) throw timedOut();
    let cancel: () => void = noop;
    const arm = () => {
      const left = this.deadline - this.host.clock.now();
      // Node.js timers overflow past MAX_TIMER_MS: a longer wait is armed again when it ends.
      if (left > 0) cancel = this.host.clock.setTimer(Math.min(left, MAX_TIMER_MS), arm);
      else this.timeOut(timedOut());
    };
    arm();
    try {
      const output = await handler();
      if (this.stopReason instanceof RunTimeoutError) throw this.stopReason;
      return output;
    } finally {
      cancel();
    }
  }

  /** The run's timeout passed while it ran: its signal aborts and its running steps reject with it. */
  private timeOut(error: RunTimeoutError): void {
    if (this.stopReason) return;
    this.stopReason = error;
    this.controller?.abort(error);
    this.steps?.interrupt(error);
  }

  /**
   * A run whose workflow has `cancelOn` registers its triggers (matched on its input) when its
   * first attempt starts; the run hash's `cancelOn` field says it is done.
   */
  private async registerCancelOn(triggers: readonly CancelOnTrigger[] | undefined, workflow: string, input: unknown): Promise<void> {
    if (!triggers?.length || this.claimed.hash.cancelOn) return;
    const keys = cancelOnKeys(workflow, triggers, input);
    const code = await this.redisCall(() => this.host.scripts.registerCancelOn(this.runId, this.token, keys));
    if (code === 'lost') {
      this.lost('lost');
      throw this.stopReason ?? new CanceledError(this.runId, 'this worker no longer holds the run');
    }
  }

  /** The run waits (a timer or a child): back to scheduled, without using an attempt. */
  private async suspend(queue: string, suspension: { dueAt: number; waitFields: string[] }): Promise<ClaimedRun | null> {
    const dueAt = notAfterDeadline(suspension.dueAt, this.deadline);
    const result = await this.finish('wait', '', dueAt, suspension.waitFields);
    this.outcome = result.code === 'ok' ? { outcome: 'suspended', suspended: true } : { outcome: result.code };
    if (result.code === 'ok' && dueAt > 0) this.host.runScheduled(queue, dueAt);
    return result.next;
  }

  /** A run of another version: back to scheduled for HAND_BACK_MS, its attempt unchanged. */
  private async handBack(list: string, workflow: string, runVersion: number, ownVersion: number): Promise<ClaimedRun | null> {
    this.host.versionMismatch(list, workflow, runVersion, ownVersion);
    const result = await this.finish('wait', '', this.host.clock.now() + HAND_BACK_MS, [], false);
    this.outcome = result.code === 'ok' ? { outcome: 'suspended', suspended: true } : { outcome: result.code };
    return null;
  }

  /**
   * `onNonDeterminism: 'retry-latest'`: the run moves to the latest registered version (its queue
   * field and the queue it waits in) and is retried there at once; null when it already is on it.
   */
  private async retryOnLatest(error: NonDeterminismError, info: RunInfo): Promise<{ next: ClaimedRun | null } | null> {
    const latest = await this.redisCall(() => this.host.latestQueue(info.workflow));
    if (!latest || parseVersionQueue(latest).version <= parseVersionQueue(info.queue).version) return null;
    const now = this.host.clock.now();
    const result = await this.finish('retry', serializeError(error), now, [], false, ['queue', latest], latest);
    this.outcome = result.code !== 'ok' ? { outcome: result.code } : { outcome: 'retry', error };
    if (result.code === 'ok') {
      this.host.hooks.emit('onRunFailed', { runId: this.runId, workflow: info.workflow, attempt: info.attempt, error, willRetry: true, retryAt: now, durationMs: Date.now() - this.startedAt });
      this.host.runScheduled(latest, now);
    }
    return { next: result.next };
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
      halted: Boolean(this.halted),
      stopReason: this.stopReason,
      workflow: definition && { retries: definition.options.retries, onNonDeterminism: definition.options.onNonDeterminism, hasOnFailure: Boolean(definition.options.onFailure) },
      latestTried,
      compensationsDue: () => Boolean(this.steps && dueCompensations(this.runId, this.steps.journal()).length),
    };
  }

  /** The attempt failed: carries out what `decideFailure` says (retry, compensate or fail). */
  private async fail(thrown: unknown, info: RunInfo, input: unknown): Promise<ClaimedRun | null> {
    if (this.abandoned) return null;
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
        return this.endCompensation(decision.target, this.claimed.hash.error || serializeError(decision.error), { ok: false, ran: [], step: '', error: decision.error }, info, input);
      case 'compensate':
        return this.failAndCompensate(decision.error, info, input);
      case 'retry':
      case 'fail':
        return this.retryOrFail(decision, info, input);
    }
  }

  /** Failed for good with compensations due: the run becomes `compensating`, and they run now. */
  private async failAndCompensate(error: unknown, info: RunInfo, input: unknown): Promise<ClaimedRun | null> {
    const journal = this.steps!.journal();
    const errorJson = serializeError(error);
    const result = await this.finish('compensate', errorJson, 0, undefined, false);
    if (result.code !== 'ok') {
      this.outcome = { outcome: result.code };
      return result.next;
    }
    this.host.hooks.emit('onRunFailed', { runId: this.runId, workflow: info.workflow, attempt: info.attempt, error, willRetry: false, durationMs: Date.now() - this.startedAt });
    return this.compensate(this.host.registry.get(info.workflow)!, info, input, errorJson, 'failed', journal);
  }

  private async retryOrFail(decision: { action: 'retry'; error: unknown; dueAt: number } | { action: 'fail'; error: unknown; onFailure: boolean }, info: RunInfo, input: unknown): Promise<ClaimedRun | null> {
    const { error } = decision;
    const retry = decision.action === 'retry';
    // A run claimed by this finish would wait, unrenewed, while onFailure runs: claim none then.
    const hook = !retry && decision.onFailure;
    const result = await this.finish(retry ? 'retry' : 'failed', serializeError(error), retry ? decision.dueAt : 0, undefined, !hook);
    // A canceled run, or one another worker took over, did not fail here: its span says so without an error.
    this.outcome = result.code !== 'ok' ? { outcome: result.code } : this.stopReason instanceof CanceledError ? { outcome: 'canceled' } : { outcome: retry ? 'retry' : 'failed', error };
    if (result.code !== 'ok') return result.next;
    const retryAt = retry ? decision.dueAt : undefined;
    this.host.hooks.emit('onRunFailed', { runId: this.runId, workflow: info.workflow, attempt: info.attempt, error, willRetry: retry, retryAt, durationMs: Date.now() - this.startedAt });
    if (retry) {
      this.host.runScheduled(info.queue, decision.dueAt);
    } else {
      await this.runOnFailure(error, info, input);
    }
    return result.next;
  }

  private async runOnFailure(error: unknown, info: RunInfo, input: unknown, compensation?: CompensationOutcome): Promise<void> {
    const onFailure = this.host.registry.get(info.workflow)?.options.onFailure;
    if (!onFailure) return;
    try {
      await onFailure(compensation ? { error, run: info, input, compensation } : { error, run: info, input });
    } catch (hookError) {
      this.host.logger.error(`onFailure of workflow "${info.workflow}" threw for run "${this.runId}": ${(hookError as Error)?.message}`, (hookError as Error)?.stack);
    }
  }

  private async finish(outcome: FinishOutcome, payload: string, dueAt: number, waitFields: string[] = [], claimNext = true, extra: string[] = [], queue = this.queue): Promise<FinishResult> {
    if (this.abandoned) return { code: 'lost', next: null };
    const records = this.steps ? this.steps.takePending() : [];
    records.push(...extra);
    const result = await this.redisCall(() => this.host.scripts.finish({
      runId: this.runId,
      queue,
      token: this.token,
      now: this.host.clock.now(),
      outcome,
      payload,
      dueAt,
      nextToken: claimNext && this.host.claiming && !this.host.claimSkips.has(queue) ? this.host.nextLeaseToken() : '',
      leaseMs: this.host.leaseMs,
      waitFields,
      records,
    }));
    if (result.code === 'lost') this.host.leaseLost(this.runId, this.startedAt);
    return result;
  }
}
