import { CanceledError, ConfigurationError, CorruptRunDataError, RunNotEndedError, RunNotFoundError, RunNotResumableError, RunTerminatedError, SignalBufferFullError } from '../errors';
import { assertKnownKeys, checkDuration, checkUserName, describeValue, PRUNE_OPTION_KEYS } from '../definition/option-checks';
import { encodeJson, serializeError } from '../store/serialization';
import { isWorkflowName, WORKFLOW_NAME_RULE } from '../definition/workflow';
import { ENDED_STATUSES, type EndedStatus, type RunHandle } from '../definition/run-types';
import type { PruneOptions } from '../definition/run-options';

import { RunProducer } from './producer';
import { isPossibleRunId, newRunId } from './client-core';

/** Signals a run holds before a wait consumes them; one more is refused. */
export const MAX_BUFFERED_SIGNALS = 1_000;

/** Runs `prune` deletes per atomic call at most, so that Redis is never blocked for long. */
const PRUNE_BATCH = 500;

/** The `statuses` of `prune`, checked: ended statuses only, all four by default. */
function checkPruneStatuses(statuses: unknown): ReadonlySet<EndedStatus> {
  if (statuses === undefined) return new Set(ENDED_STATUSES);
  if (!Array.isArray(statuses) || statuses.length === 0) {
    throw new ConfigurationError(`prune statuses must be a non-empty array of ${ENDED_STATUSES.join(', ')}, got ${describeValue(statuses)}.`);
  }
  for (const status of statuses) {
    if (!ENDED_STATUSES.includes(status as EndedStatus)) {
      throw new ConfigurationError(
        `prune statuses may hold only ${ENDED_STATUSES.join(', ')}, got ${describeValue(status)}: runs that have not ended are never pruned (cancel them first).`,
      );
    }
  }
  return new Set(statuses as EndedStatus[]);
}

/** Controlling runs: cancel or terminate (with the children they wait on), re-run, resume, signal, delete and prune ended runs. */
export class RunControl extends RunProducer {
  /**
   * Starts a new run of an ended run's workflow with the same input, queue, attempts and
   * flow-control keys (mutex, throttle, rate limit) and timeout. Returns its handle.
   */
  rerun<TOutput = unknown>(id: string): Promise<RunHandle<TOutput>> {
    return this.call(() => this.rerunNow<TOutput>(id));
  }

  protected async rerunNow<TOutput>(id: string): Promise<RunHandle<TOutput>> {
    if (!isPossibleRunId(id)) throw new RunNotFoundError(String(id));
    const [workflow, queue, maxAttempts, input, mutex, throttle, rateLimit, timeout] = await this.redis.hmget(
      this.keys.run(id),
      'workflow',
      'queue',
      'maxAttempts',
      'input',
      'mutex',
      'throttle',
      'rateLimit',
      'timeout',
    );
    if (!workflow || !queue) throw new RunNotFoundError(id);
    const extra: string[] = [];
    for (const [field, value] of [['mutex', mutex], ['throttle', throttle], ['rateLimit', rateLimit], ['timeout', timeout]] as const) if (value !== null) extra.push(field, value);
    const result = await this.scripts.enqueue({
      runId: newRunId(),
      workflow,
      queue,
      maxAttempts: maxAttempts ?? '1',
      input: input ?? '',
      now: this.clock.now(),
      runAt: 0,
      idempotencyKey: '',
      idempotencyTtlSec: 1,
      localFlow: true,
      extra,
    });
    return this.handle<TOutput>(result.runId);
  }

  /**
   * Restarts a failed, canceled or terminated run in place, under the same id, from its first incomplete step:
   * steps that succeeded are not run again (the replay returns their stored outputs), failed ones
   * are. Attempts count on (the next is the last one + 1) with a fresh budget of the workflow's
   * `maxAttempts`, and the run queues like a new one, so its mutex, concurrency, throttle and rate
   * limit apply. Resolves `true` when queued, `false` when the run does not exist; throws
   * `RunNotResumableError` when it is queued, scheduled, running or succeeded.
   */
  resume(id: string): Promise<boolean> {
    return this.call(() => this.resumeNow(id));
  }

  protected async resumeNow(id: string): Promise<boolean> {
    if (!isPossibleRunId(id)) return false;
    const outcome = await this.scripts.resume(id, this.clock.now());
    if (outcome === 'ok') return true;
    if (outcome === 'missing') return false;
    if (outcome === 'corrupt') throw new CorruptRunDataError(id, 'the run hash lacks a workflow or queue field');
    throw new RunNotResumableError(id, outcome);
  }

  /**
   * Cancels a run that has not ended. Queued and scheduled runs end at once; a running run's signal
   * aborts and no later step starts. Returns false when the run already ended, is compensating or
   * does not exist. With `compensate: true`, a run with completed steps that have `compensate`
   * functions becomes `compensating`: a worker runs them in reverse order, then it ends `canceled`
   * with `compensated: true` (its unfinished children alike).
   */
  async cancelRun(id: string, options: { reason?: string; compensate?: boolean } = {}): Promise<boolean> {
    assertKnownKeys('cancelRun options', options, ['reason', 'compensate']);
    if (options.reason !== undefined) checkUserName(options.reason, 'cancelRun reason', { max: 1000 });
    if (options.compensate !== undefined && typeof options.compensate !== 'boolean') {
      throw new ConfigurationError(`cancelRun compensate must be true or false, got ${describeValue(options.compensate)}.`);
    }
    if (!isPossibleRunId(id)) return false;
    const error = serializeError(new CanceledError(id, options.reason));
    const result = await this.call(() => this.scripts.cancel(id, this.clock.now(), error, options.reason ?? '', options.compensate === true));
    return result === 'ok';
  }

  /**
   * Ends a run at once, as `terminated`: not cooperative like `cancelRun`, and nothing of the
   * workflow runs after it (no `onFailure`, no compensation). A running attempt's `AbortSignal`
   * aborts with `RunTerminatedError` and no later step starts; the unfinished children it waits on
   * are terminated too, and parents waiting on it get a failed step (`RunTerminatedError`).
   * Resolves `true` when this call terminated it, `false` when the run had already ended (its status
   * is unchanged); throws `RunNotFoundError` when there is no such run.
   */
  async terminate(id: string, options: { reason?: string } = {}): Promise<boolean> {
    assertKnownKeys('terminate options', options, ['reason']);
    if (options.reason !== undefined) checkUserName(options.reason, 'terminate reason', { max: 1000 });
    if (!isPossibleRunId(id)) throw new RunNotFoundError(String(id));
    const error = serializeError(new RunTerminatedError(id, options.reason));
    const result = await this.call(() => this.scripts.terminate(id, this.clock.now(), error, options.reason ?? ''));
    if (result === 'missing') throw new RunNotFoundError(id);
    return result === 'ok';
  }

  /**
   * Deletes one ended run and everything it owns (step records, index entries, idempotency key,
   * children, waiters and signals), as retention does. A run that has not ended is refused with
   * `RunNotEndedError` and left as it was, unless `force: true`: then it is terminated (as
   * `terminate` does, children included) and deleted in one atomic call. Resolves `true` when
   * deleted, `false` when there is no such run.
   */
  async deleteRun(id: string, options: { force?: boolean } = {}): Promise<boolean> {
    assertKnownKeys('deleteRun options', options, ['force']);
    if (options.force !== undefined && typeof options.force !== 'boolean') {
      throw new ConfigurationError(`deleteRun option "force" must be a boolean, got ${describeValue(options.force)}.`);
    }
    if (!isPossibleRunId(id)) return false;
    const force = options.force === true;
    const error = force ? serializeError(new RunTerminatedError(id, 'deleted with force')) : '';
    const result = await this.call(() => this.scripts.deleteRun(id, this.clock.now(), force, error, force ? 'deleted with force' : ''));
    if (result === 'ok') return true;
    if (result === 'missing') return false;
    throw new RunNotEndedError(id, result);
  }

  /**
   * Deletes ended runs (`statuses`, by default succeeded, failed, canceled and terminated) that finished more
   * than `olderThan` ago, each with everything it owns (step records, index entries, idempotency
   * key, children and waiters sets), as retention does; with `workflow`, only that workflow's.
   * Runs that have not ended are never deleted. Works in atomic batches of 500 runs, oldest first,
   * until none is left, and resolves with the number of runs deleted.
   */
  async prune(options: PruneOptions): Promise<{ deleted: number }> {
    assertKnownKeys('prune options', options, PRUNE_OPTION_KEYS);
    if (options?.olderThan === undefined) {
      throw new ConfigurationError('prune needs olderThan: how long ago a run must have finished to be deleted (ms, or a string such as "7d").');
    }
    const olderThanMs = checkDuration(options.olderThan, 'prune olderThan', { allowZero: true });
    const statuses = checkPruneStatuses(options.statuses);
    const { workflow } = options;
    if (workflow !== undefined && !isWorkflowName(workflow)) {
      throw new ConfigurationError(`prune workflow must be a workflow name, got ${describeValue(workflow)}. ${WORKFLOW_NAME_RULE}`);
    }
    const cutoff = this.clock.now() - olderThanMs;
    let deleted = 0;
    for (;;) {
      const batch = await this.call(() => this.scripts.prune({ cutoff, batch: PRUNE_BATCH, statuses, workflow }));
      deleted += batch.deleted;
      if (batch.taken < PRUNE_BATCH) return { deleted };
    }
  }

  /**
   * Sends a signal to a run: the step waiting for it (`step.waitForSignal`) gets `payload`, or the
   * signal is buffered for the next wait on its name. Resolves `false` when the run has ended or
   * does not exist; throws `SignalBufferFullError` when the run already holds 1,000 unconsumed
   * signals.
   */
  async signal(runId: string, name: string, payload: unknown = null): Promise<boolean> {
    if (!isPossibleRunId(runId)) return false;
    checkUserName(name, 'The signal name');
    const text = encodeJson(payload ?? null, `The payload of signal "${name}"`, this.maxPayloadBytes);
    const outcome = await this.call(() => this.scripts.signal(runId, name, text, this.clock.now(), MAX_BUFFERED_SIGNALS));
    if (outcome === 'full') throw new SignalBufferFullError(runId, name, MAX_BUFFERED_SIGNALS);
    return outcome === 'delivered' || outcome === 'buffered';
  }
}
