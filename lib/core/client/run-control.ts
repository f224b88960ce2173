import { assertKnownKeys, checkDuration, checkUserName, describeValue, PRUNE_OPTION_KEYS } from '../definition/option-checks';
import type { PruneOptions } from '../definition/run-options';
import { ENDED_STATUSES, type EndedStatus, type RunHandle } from '../definition/run-types';
import { signalName, validateSignalPayload, type SignalDefinition } from '../definition/signal-definition';
import { isWorkflowName, WORKFLOW_NAME_RULE } from '../definition/workflow';
import {
  CanceledError,
  ConfigurationError,
  CorruptRunDataError,
  RunNotEndedError,
  RunNotFoundError,
  RunNotResumableError,
  RunTerminatedError,
  SignalBufferFullError,
} from '../errors';
import { encodeJson, serializeError } from '../store/serialization';
import { isPossibleRunId, newRunId, type ClientContext } from './client-context';
import type { RunWaiter } from './run-waiter';

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

/**
 * Controlling runs: cancel or terminate (with the children they wait on), re-run, resume, signal,
 * delete and prune ended runs. Its public methods are documented where `WorkflowClient` forwards
 * to them.
 */
export class RunControl {
  constructor(
    private readonly ctx: ClientContext,
    private readonly waiter: RunWaiter,
  ) {}

  rerun<TOutput = unknown>(id: string): Promise<RunHandle<TOutput>> {
    return this.ctx.call(() => this.rerunNow<TOutput>(id));
  }

  private async rerunNow<TOutput>(id: string): Promise<RunHandle<TOutput>> {
    if (!isPossibleRunId(id)) throw new RunNotFoundError(String(id));
    const source = await this.ctx.runQueries.rerunSource(id);
    if (!source) throw new RunNotFoundError(id);
    const result = await this.ctx.scripts.enqueue({
      ...source,
      runId: newRunId(),
      now: this.ctx.clock.now(),
      runAt: 0,
      idempotencyKey: '',
      idempotencyTtlSec: 1,
      localFlow: true,
    });
    return this.waiter.handle<TOutput>(result.runId);
  }

  resume(id: string): Promise<boolean> {
    return this.ctx.call(() => this.resumeNow(id));
  }

  private async resumeNow(id: string): Promise<boolean> {
    if (!isPossibleRunId(id)) return false;
    const outcome = await this.ctx.scripts.resume(id, this.ctx.clock.now());
    if (outcome === 'ok') return true;
    if (outcome === 'missing') return false;
    if (outcome === 'corrupt') throw new CorruptRunDataError(id, 'the run hash lacks a workflow or queue field');
    throw new RunNotResumableError(id, outcome);
  }

  async cancelRun(id: string, options: { reason?: string; compensate?: boolean } = {}): Promise<boolean> {
    assertKnownKeys('cancelRun options', options, ['reason', 'compensate']);
    if (options.reason !== undefined) checkUserName(options.reason, 'cancelRun reason', { max: 1000 });
    if (options.compensate !== undefined && typeof options.compensate !== 'boolean') {
      throw new ConfigurationError(`cancelRun compensate must be true or false, got ${describeValue(options.compensate)}.`);
    }
    if (!isPossibleRunId(id)) return false;
    const error = serializeError(new CanceledError(id, options.reason));
    const result = await this.ctx.call(() => this.ctx.scripts.cancel(id, this.ctx.clock.now(), error, options.reason ?? '', options.compensate === true));
    return result === 'ok';
  }

  async terminate(id: string, options: { reason?: string } = {}): Promise<boolean> {
    assertKnownKeys('terminate options', options, ['reason']);
    if (options.reason !== undefined) checkUserName(options.reason, 'terminate reason', { max: 1000 });
    if (!isPossibleRunId(id)) throw new RunNotFoundError(String(id));
    const error = serializeError(new RunTerminatedError(id, options.reason));
    const result = await this.ctx.call(() => this.ctx.scripts.terminate(id, this.ctx.clock.now(), error, options.reason ?? ''));
    if (result === 'missing') throw new RunNotFoundError(id);
    return result === 'ok';
  }

  async deleteRun(id: string, options: { force?: boolean } = {}): Promise<boolean> {
    assertKnownKeys('deleteRun options', options, ['force']);
    if (options.force !== undefined && typeof options.force !== 'boolean') {
      throw new ConfigurationError(`deleteRun option "force" must be a boolean, got ${describeValue(options.force)}.`);
    }
    if (!isPossibleRunId(id)) return false;
    const force = options.force === true;
    const error = force ? serializeError(new RunTerminatedError(id, 'deleted with force')) : '';
    const result = await this.ctx.call(() => this.ctx.scripts.deleteRun(id, this.ctx.clock.now(), force, error, force ? 'deleted with force' : ''));
    if (result === 'ok') return true;
    if (result === 'missing') return false;
    throw new RunNotEndedError(id, result);
  }

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
    const cutoff = this.ctx.clock.now() - olderThanMs;
    let deleted = 0;
    for (;;) {
      const batch = await this.ctx.call(() => this.ctx.scripts.prune({ cutoff, batch: PRUNE_BATCH, statuses, workflow }));
      deleted += batch.deleted;
      if (batch.taken < PRUNE_BATCH) return { deleted };
    }
  }

  async signal(runId: string, signal: string | SignalDefinition, payload: unknown = null): Promise<boolean> {
    const name = signalName(signal);
    checkUserName(name, 'The signal name');
    if (typeof signal !== 'string' && signal.schema) payload = await validateSignalPayload(`signal "${name}"`, name, signal.schema, payload);
    if (!isPossibleRunId(runId)) return false;
    const text = this.ctx.payloads.seal(encodeJson(payload ?? null, `The payload of signal "${name}"`, this.ctx.maxPayloadBytes), { kind: 'signal', runId });
    const outcome = await this.ctx.call(() => this.ctx.scripts.signal(runId, name, text, this.ctx.clock.now(), MAX_BUFFERED_SIGNALS));
    if (outcome === 'full') throw new SignalBufferFullError(runId, name, MAX_BUFFERED_SIGNALS);
    return outcome === 'delivered' || outcome === 'buffered';
  }
}
