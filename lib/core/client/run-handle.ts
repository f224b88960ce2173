import {
  CanceledError,
  ClientClosedError,
  RedisUnavailableError,
  RunNotFoundError,
  TimeoutError,
} from '../errors';
import { assertKnownKeys, checkDuration, checkUserName } from '../definition/option-checks';
import { VALUE_FIELD_PREFIX } from '../store/step-record';
import { decodeJson, deserializeError } from '../store/serialization';
import type { FinalStatus, RunHandle, RunOutcome } from '../definition/run-types';
import type { WaitForRunOptions } from '../definition/run-options';

import { RunReader } from './run-reader';
import { RunEndWatcher, type EndedRun } from './run-end-watcher';
import { isPossibleRunId, sleep } from './client-core';

const TERMINAL_STATUSES: readonly string[] = ['succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated'];

/** The run hash fields a waiter reads: the status and what each end leaves. */
const END_FIELDS = ['status', 'output', 'error', 'cancelReason'] as const;

/** `{ status, payload }` of an ended run from its END_FIELDS, or undefined while it has not ended. */
function endedFrom([status, output, error, reason]: (string | null)[]): EndedRun | undefined {
  if (status === 'succeeded') return { status, payload: output ?? '' };
  if (status === 'failed' || status === 'compensation_failed') return { status, payload: error ?? '' };
  if (status === 'canceled') return { status, payload: reason ?? '' };
  if (status === 'terminated') return { status, payload: error ?? '' };
  return undefined;
}

/** The final state of a run from its status and payload (output JSON, error JSON or cancel reason). */
function toOutcome<TOutput>(id: string, status: FinalStatus, payload: string): RunOutcome<TOutput> {
  if (status === 'succeeded') return { runId: id, status, output: decodeJson(payload, id, 'output') as TOutput };
  if (status === 'failed' || status === 'compensation_failed' || status === 'terminated') return { runId: id, status, error: deserializeError(payload) };
  return { runId: id, status, error: new CanceledError(id, payload || undefined), reason: payload || undefined };
}

function isAbortSignal(value: unknown): value is AbortSignal {
  return typeof value === 'object' && value !== null && typeof (value as AbortSignal).aborted === 'boolean' && typeof (value as AbortSignal).addEventListener === 'function';
}

/** How long `getRunEvent` waits by default. */
const GET_RUN_EVENT_TIMEOUT_MS = 60_000;

/** Handles on runs: `handle(id)`, waiting for a run's result, and for the values it publishes. */
export class RunHandles extends RunReader {
  private watcher: RunEndWatcher | undefined;

  /** A handle for an existing run id. */
  handle<TOutput = unknown>(id: string): RunHandle<TOutput> {
    return {
      id,
      getState: () => this.getRun<TOutput>(id),
      result: async (options) => {
        assertKnownKeys('result() options', options, ['timeoutMs', 'signal']);
        if (options?.signal !== undefined && !isAbortSignal(options.signal)) throw new TypeError('result() option "signal" must be an AbortSignal.');
        return this.waitForResult<TOutput>(id, options?.timeoutMs, options?.signal);
      },
    };
  }

  /**
   * Waits for a run to end, without polling. By default it resolves with the run's output and
   * rejects with its error (`CanceledError` when canceled); with `throwOnFailure: false` it
   * resolves with the final state whatever it is. Rejects with `TimeoutError` after `timeoutMs`,
   * with the signal's reason when `signal` aborts, and with `RunNotFoundError` when there is no
   * such run. Without `timeoutMs`, a Redis that does not answer within `commandTimeoutMs`
   * rejects it with `RedisUnavailableError`; with it, the wait rides out the outage until then.
   *
   * Cost: one read of the run, then nothing until the run's end message arrives (it carries the
   * result, up to 64 KiB; a larger one is read once more). See RunEndWatcher.
   */
  waitForRun<TOutput = unknown>(id: string, options: WaitForRunOptions & { throwOnFailure: false }): Promise<RunOutcome<TOutput>>;
  waitForRun<TOutput = unknown>(id: string, options?: WaitForRunOptions & { throwOnFailure?: true }): Promise<TOutput>;
  async waitForRun<TOutput = unknown>(id: string, options: WaitForRunOptions = {}): Promise<TOutput | RunOutcome<TOutput>> {
    assertKnownKeys('waitForRun options', options, ['timeoutMs', 'signal', 'throwOnFailure']);
    if (options.signal !== undefined && !isAbortSignal(options.signal)) throw new TypeError('waitForRun option "signal" must be an AbortSignal.');
    if (options.throwOnFailure !== undefined && typeof options.throwOnFailure !== 'boolean') throw new TypeError('waitForRun option "throwOnFailure" must be true or false.');
    const outcome = await this.awaitEnd<TOutput>(id, options.timeoutMs, options.signal, 'waitForRun timeoutMs');
    if (options.throwOnFailure === false) return outcome;
    if (outcome.status === 'succeeded') return outcome.output;
    throw outcome.error;
  }

  /** `handle.result()`: the output, or the run's error. */
  protected async waitForResult<TOutput>(id: string, timeoutMs?: number, signal?: AbortSignal): Promise<TOutput> {
    const outcome = await this.awaitEnd<TOutput>(id, timeoutMs, signal, 'result() timeoutMs');
    if (outcome.status === 'succeeded') return outcome.output;
    throw outcome.error;
  }

  private get endWatcher(): RunEndWatcher {
    this.watcher ??= new RunEndWatcher(this.redis, this.keys.endedChannel(), this.health, (ids) => this.readEnded(ids));
    return this.watcher;
  }

  /** Reads runs in one round trip (a pipeline: every run key has the prefix's hash tag): the ended ones. */
  private async readEnded(ids: string[]): Promise<Map<string, EndedRun>> {
    const ended = new Map<string, EndedRun>();
    for (let i = 0; i < ids.length; i += 1_000) {
      const chunk = ids.slice(i, i + 1_000);
      const pipeline = this.redis.pipeline();
      for (const id of chunk) pipeline.hmget(this.keys.run(id), ...END_FIELDS);
      const replies = (await this.call(() => pipeline.exec())) ?? [];
      replies.forEach(([error, fields], j) => {
        const run = error ? undefined : endedFrom(fields as (string | null)[]);
        if (run) ended.set(chunk[j], run);
      });
    }
    return ended;
  }

  /**
   * Listens for the run's end message, then reads the run once (it may have ended before the
   * subscription), then waits for the message. Settles once, whatever comes first: the end, the
   * deadline, the abort, or an error.
   */
  private awaitEnd<TOutput>(id: string, timeoutMs: number | undefined, signal: AbortSignal | undefined, what: string): Promise<RunOutcome<TOutput>> {
    if (timeoutMs !== undefined) checkDuration(timeoutMs, what, { allowZero: true, timer: true });
    if (!isPossibleRunId(id)) return Promise.reject(new RunNotFoundError(String(id)));
    const watcher = this.endWatcher;
    return new Promise<RunOutcome<TOutput>>((resolve, reject) => {
      let settled = false;
      let redisSilent = false;
      let stop = () => undefined as void;
      let timer: NodeJS.Timeout | undefined;
      const settle = (finish: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        stop();
        signal?.removeEventListener('abort', onAbort);
        finish();
      };
      const fail = (error: unknown) => settle(() => reject(error));
      const onAbort = () => fail(signal?.reason ?? new DOMException('The wait was aborted.', 'AbortError'));
      const ended = (run: EndedRun) => {
        if (settled) return;
        if (run.payload === undefined) {
          // The result was too large for the message: read it.
          this.readEnded([id]).then((runs) => {
            const read = runs.get(id);
            if (read?.payload !== undefined) ended(read);
            else fail(new RunNotFoundError(id));
          }, fail);
          return;
        }
        let outcome: RunOutcome<TOutput>;
        try {
          outcome = toOutcome<TOutput>(id, run.status, run.payload);
        } catch (error) {
          return fail(error);
        }
        settle(() => resolve(outcome));
      };
      stop = watcher.listen(id, ended, () => fail(new ClientClosedError(`Waiting for the result of run "${id}"`)));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(() => fail(new TimeoutError(`Waiting for the result of run "${id}"${redisSilent ? ` (Redis at ${this.health.address} did not answer)` : ''}`, timeoutMs)), timeoutMs);
      }
      const firstRead = async () => {
        for (;;) {
          try {
            await this.call(() => watcher.subscribe());
            const fields = await this.call(() => this.redis.hmget(this.keys.run(id), ...END_FIELDS));
            if (fields[0] === null) return fail(new RunNotFoundError(id));
            const run = endedFrom(fields);
            if (run) ended(run);
            return;
          } catch (error) {
            // With a deadline, an outage is waited out until it; without one, it is the answer.
            if (!(error instanceof RedisUnavailableError) || timeoutMs === undefined) throw error;
            redisSilent = true;
            if (settled) return;
            await sleep(200);
            if (settled) return;
          }
        }
      };
      firstRead().catch(fail);
    });
  }

  override async close(): Promise<void> {
    await this.watcher?.close();
    await super.close();
  }

  /**
   * The value the run published under `key` with `ctx.setEvent` (the latest one). Waits until it
   * exists, for at most `timeoutMs` (default 60 s), and returns `null` when it does not exist by
   * then or the run ended without it. `RunNotFoundError` when the run does not exist.
   */
  async getRunEvent<T = unknown>(runId: string, key: string, options: { timeoutMs?: number } = {}): Promise<T | null> {
    assertKnownKeys('getRunEvent options', options, ['timeoutMs']);
    checkUserName(key, 'The key of getRunEvent');
    const timeoutMs = options.timeoutMs === undefined ? GET_RUN_EVENT_TIMEOUT_MS : checkDuration(options.timeoutMs, 'getRunEvent timeoutMs', { allowZero: true, timer: true });
    const deadline = Date.now() + timeoutMs;
    const field = VALUE_FIELD_PREFIX + key;
    let pause = 10;
    for (;;) {
      const [status, value] = isPossibleRunId(runId) ? await this.call(() => this.redis.hmget(this.keys.run(runId), 'status', field)) : [null, null];
      if (status === null) throw new RunNotFoundError(runId);
      if (value !== null) return decodeJson(value, runId, field) as T;
      if (TERMINAL_STATUSES.includes(status) || Date.now() >= deadline) return null;
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
      pause = Math.min(pause * 2, 250);
    }
  }
}
