import type { CompensationOutcome } from '../definition/step-types';
import type { SpanOutcome } from '../definition/tracing';
import type { RunInfo } from '../definition/workflow';
import { CanceledError, type NonDeterminismError } from '../errors';
import { attemptRecordFields } from '../store/attempt-record';
import type { ClaimedRun, FinishOutcome, FinishResult } from '../store/redis-scripts';
import { deserializeError, serializeError } from '../store/serialization';
import type { AttemptState } from './attempt-state';
import type { CompensationResult } from './compensations';
import type { ExecutorHost } from './executor-host';

/** How an attempt ends: the arguments of its one finish call (`finish-4.lua`). */
export interface AttemptEnd {
  outcome: FinishOutcome;
  /** The output (succeeded) or the error (failed, retry...) as stored text. @default '' */
  payload?: string;
  /** When the run is due again (retry, wait), workflow time; 0 = not by time. @default 0 */
  dueAt?: number;
  /** The step fields a waiting run waits on (children). @default [] */
  waitFields?: string[];
  /** Whether the call may claim the worker's next run. @default true */
  claimNext?: boolean;
  /** Run-hash fields written with the end: name, value, name, value... @default [] */
  fields?: string[];
  /** The queue the run goes to (a move to another version's queue). @default the run's queue */
  queue?: string;
  /** What the attempt's span says when the call succeeds; unchanged when undefined. */
  span?: SpanOutcome;
}

/** What the finisher needs from the attempt it ends. */
export interface FinishedAttempt {
  readonly runId: string;
  readonly token: string;
  readonly queue: string;
  /** When the attempt started (ms, real time). */
  readonly startedAt: number;
  readonly state: AttemptState;
  /** Step records of the attempt not stored yet: the finish call stores them. */
  takePendingRecords(): string[];
  /** The attempt found its lease gone (reported to the worker once per attempt). */
  leaseLost(): void;
  /** A call that rides out a Redis outage (see RunExecutor.redisCall). */
  redisCall<T>(fn: () => Promise<T>): Promise<T>;
}

/** The retry-or-fail answers of `decideFailure`. */
export type RetryOrFail = { action: 'retry'; error: unknown; dueAt: number } | { action: 'fail'; error: unknown; onFailure: boolean };

/** How long a run claimed by a worker without its version waits before it is offered again. */
const HAND_BACK_MS = 1_000;

/**
 * Ends an attempt: each way an attempt can end is one finish call (which also claims the worker's
 * next run), then the hooks and the span outcome of that ending. The decision of which ending is
 * not made here (failure-decision.ts, run-executor.ts).
 */
export class AttemptFinisher {
  /** How the attempt ended, for its span. */
  outcome: SpanOutcome = { outcome: 'abandoned' };

  constructor(
    private readonly host: ExecutorHost,
    private readonly attempt: FinishedAttempt,
  ) {}

  /** The one finish call of the attempt; an abandoned attempt writes nothing. */
  async finish(end: AttemptEnd): Promise<FinishResult> {
    const { host, attempt } = this;
    if (attempt.state.abandoned) return { code: 'lost', next: null };
    const queue = end.queue ?? attempt.queue;
    const records = attempt.takePendingRecords();
    if (end.fields) records.push(...end.fields);
    const result = await attempt.redisCall(() =>
      host.scripts.finish({
        runId: attempt.runId,
        queue,
        token: attempt.token,
        now: host.clock.now(),
        outcome: end.outcome,
        payload: end.payload ?? '',
        dueAt: end.dueAt ?? 0,
        nextToken: end.claimNext !== false && host.claiming && !host.claimSkips.has(queue) ? host.nextLeaseToken() : '',
        leaseMs: host.leaseMs,
        waitFields: end.waitFields ?? [],
        records,
      }),
    );
    if (result.code === 'lost') attempt.leaseLost();
    if (result.code !== 'ok') this.outcome = { outcome: result.code };
    else if (end.span) this.outcome = end.span;
    return result;
  }

  /** The handler returned: the run succeeded with `encoded` as its output. */
  async succeeded(info: RunInfo, output: unknown, encoded: string): Promise<ClaimedRun | null> {
    // A run that succeeds at once keeps no attempt record; one that failed before records this one too.
    const fields = info.attempt > 1 ? this.attemptRecord(info, 'succeeded') : undefined;
    const result = await this.finish({ outcome: 'succeeded', payload: encoded, fields, span: { outcome: 'succeeded' } });
    if (result.code === 'ok') {
      this.host.hooks.emit('onRunComplete', { runId: this.attempt.runId, workflow: info.workflow, attempt: info.attempt, output, durationMs: this.duration() });
    }
    return result.next;
  }

  /** The run waits (a timer or a child): back to scheduled, without using an attempt. */
  async suspend(queue: string, dueAt: number, waitFields: string[]): Promise<ClaimedRun | null> {
    const result = await this.finish({ outcome: 'wait', dueAt, waitFields, span: { outcome: 'suspended', suspended: true } });
    if (result.code === 'ok' && dueAt > 0) this.host.runScheduled(queue, dueAt);
    return result.next;
  }

  /** A run of another version: back to scheduled for HAND_BACK_MS, its attempt unchanged. */
  async handBack(list: string, workflow: string, runVersion: number, ownVersion: number): Promise<ClaimedRun | null> {
    this.host.versionMismatch(list, workflow, runVersion, ownVersion);
    await this.finish({ outcome: 'wait', dueAt: this.host.clock.now() + HAND_BACK_MS, claimNext: false, span: { outcome: 'suspended', suspended: true } });
    return null;
  }

  /** `onNonDeterminism: 'retry-latest'`: the run moves to `latest` (its queue field and the queue it waits in), retried there at once. */
  async moveToLatest(error: NonDeterminismError, info: RunInfo, latest: string): Promise<ClaimedRun | null> {
    const now = this.host.clock.now();
    const errorJson = serializeError(error);
    const result = await this.finish({
      outcome: 'retry',
      payload: errorJson,
      dueAt: now,
      claimNext: false,
      fields: ['queue', latest, ...this.attemptRecord(info, 'retry', errorJson)],
      queue: latest,
      span: { outcome: 'retry', error },
    });
    if (result.code === 'ok') {
      this.host.hooks.emit('onRunFailed', {
        runId: this.attempt.runId,
        workflow: info.workflow,
        attempt: info.attempt,
        error,
        willRetry: true,
        retryAt: now,
        durationMs: this.duration(),
      });
      this.host.runScheduled(latest, now);
    }
    return result.next;
  }

  /** Another attempt later, or failed for good (then the workflow's onFailure runs, if it has one). */
  async retryOrFail(decision: RetryOrFail, info: RunInfo, input: unknown): Promise<ClaimedRun | null> {
    const { error } = decision;
    const retry = decision.action === 'retry';
    // A run claimed by this finish would wait, unrenewed, while onFailure runs: claim none then.
    const hook = !retry && decision.onFailure;
    // A canceled run, or one another worker took over, did not fail here: its span says so without an error.
    const span: SpanOutcome = this.attempt.state.stopReason instanceof CanceledError ? { outcome: 'canceled' } : { outcome: retry ? 'retry' : 'failed', error };
    const errorJson = serializeError(error);
    const result = await this.finish({
      outcome: retry ? 'retry' : 'failed',
      payload: errorJson,
      dueAt: retry ? decision.dueAt : 0,
      claimNext: !hook,
      fields: this.attemptRecord(info, retry ? 'retry' : 'failed', errorJson),
      span,
    });
    if (result.code !== 'ok') return result.next;
    const retryAt = retry ? decision.dueAt : undefined;
    this.host.hooks.emit('onRunFailed', {
      runId: this.attempt.runId,
      workflow: info.workflow,
      attempt: info.attempt,
      error,
      willRetry: retry,
      retryAt,
      durationMs: this.duration(),
    });
    if (retry) this.host.runScheduled(info.queue, decision.dueAt);
    else {
      if (!(this.attempt.state.stopReason instanceof CanceledError)) this.logEnd(info, `failed after attempt ${info.attempt}: ${errorLine(error)}`);
      await this.runOnFailure(error, info, input);
    }
    return result.next;
  }

  /** Failed for good with compensations due: the run becomes `compensating` (its lease kept); true when it did. */
  async beginCompensation(error: unknown, errorJson: string, info: RunInfo): Promise<FinishResult> {
    const result = await this.finish({ outcome: 'compensate', payload: errorJson, claimNext: false, fields: this.attemptRecord(info, 'failed', errorJson) });
    if (result.code === 'ok') {
      this.host.hooks.emit('onRunFailed', {
        runId: this.attempt.runId,
        workflow: info.workflow,
        attempt: info.attempt,
        error,
        willRetry: false,
        durationMs: this.duration(),
      });
    }
    return result;
  }

  /** Ends a compensating run: `target` when every compensation ran, else `compensation_failed`. */
  async endCompensation(
    target: 'failed' | 'canceled',
    reasonJson: string,
    result: CompensationResult,
    info: RunInfo,
    input: unknown,
  ): Promise<ClaimedRun | null> {
    const hook = target === 'failed' && Boolean(this.host.registry.get(info.workflow)?.options.onFailure);
    const span: SpanOutcome = { outcome: 'failed', error: result.ok ? deserializeError(reasonJson) : result.error };
    const finished = result.ok
      ? await this.finish({ outcome: target, payload: reasonJson, claimNext: !hook, fields: ['compensated', '1'], span })
      : await this.finish({ outcome: 'compensation_failed', payload: reasonJson, claimNext: !hook, fields: ['compError', serializeError(result.error)], span });
    if (finished.code === 'ok') {
      const reason = errorLine(deserializeError(reasonJson));
      if (!result.ok) {
        this.logEnd(
          info,
          `is compensation_failed and needs a person: a compensation failed after its retries with ${errorLine(result.error)} (the run ${target === 'canceled' ? 'was canceled' : `failed with ${reason}`}). Fix the cause, then resume it (client.resume or the dashboard) to run the compensations left.`,
        );
      } else if (target === 'failed') this.logEnd(info, `failed after attempt ${info.attempt}: ${reason}; its compensations ran`);
    }
    if (finished.code === 'ok' && hook) {
      const compensation: CompensationOutcome = result.ok
        ? { status: 'compensated', steps: result.ran }
        : { status: 'failed', steps: result.ran, error: result.error };
      await this.runOnFailure(deserializeError(reasonJson), info, input, compensation);
    }
    return finished.next;
  }

  private async runOnFailure(error: unknown, info: RunInfo, input: unknown, compensation?: CompensationOutcome): Promise<void> {
    const onFailure = this.host.registry.get(info.workflow)?.options.onFailure;
    if (!onFailure) return;
    try {
      await onFailure(compensation ? { error, run: info, input, compensation } : { error, run: info, input });
    } catch (hookError) {
      this.host.logger.error(
        `onFailure of workflow "${info.workflow}" threw for run "${this.attempt.runId}": ${(hookError as Error)?.message}`,
        (hookError as Error)?.stack,
      );
    }
  }

  /** One line for a run that ended failed or compensation_failed, unless `logFailedRuns` is off. */
  private logEnd(info: RunInfo, what: string): void {
    if (this.host.logFailedRuns) this.host.logger.error(`Run "${this.attempt.runId}" of workflow "${info.workflow}" ${what}`);
  }

  /** The attempt's record (`a:<attempt>`), written by its finish call: see store/attempt-record.ts. */
  private attemptRecord(info: RunInfo, outcome: 'retry' | 'failed' | 'succeeded', errorJson?: string): string[] {
    return attemptRecordFields(info.attempt, this.host.clock.now(), outcome, errorJson);
  }

  private duration(): number {
    return Date.now() - this.attempt.startedAt;
  }
}

/** An error as one line: its name and message. */
function errorLine(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  const e = error as { name?: unknown; message?: unknown } | null;
  return e && typeof e === 'object' && typeof e.message === 'string' ? `${String(e.name ?? 'Error')}: ${e.message}` : String(error);
}
