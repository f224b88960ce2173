import { withTimeout } from '../store/redis-health';
import {
  CanceledError,
  RedisUnavailableError,
  RunNotFoundError,
  TimeoutError,
} from '../errors';
import { assertKnownKeys, checkDuration, checkUserName } from '../definition/option-checks';
import { VALUE_FIELD_PREFIX } from '../store/step-record';
import { decodeJson, deserializeError } from '../store/serialization';
import { type RunHandle } from '../definition/types';

import { RunReader } from './run-reader';
import { isPossibleRunId, sleep } from './client-core';

const TERMINAL_STATUSES: readonly string[] = ['succeeded', 'failed', 'canceled'];

/** How long `getRunEvent` waits by default. */
const GET_RUN_EVENT_TIMEOUT_MS = 60_000;

/** Handles on runs: `handle(id)`, waiting for a run's result, and for the values it publishes. */
export class RunHandles extends RunReader {
  /** A handle for an existing run id. */
  handle<TOutput = unknown>(id: string): RunHandle<TOutput> {
    return {
      id,
      getState: () => this.getRun<TOutput>(id),
      result: async (options) => {
        assertKnownKeys('result() options', options, ['timeoutMs']);
        return this.waitForResult<TOutput>(id, options?.timeoutMs);
      },
    };
  }

  /**
   * Polls the run until it ends. With `timeoutMs`, rejects with TimeoutError at the deadline
   * even while Redis does not answer; without it, a Redis that does not answer within
   * `commandTimeoutMs` rejects with RedisUnavailableError.
   */
  protected async waitForResult<TOutput>(id: string, timeoutMs?: number): Promise<TOutput> {
    if (timeoutMs !== undefined) checkDuration(timeoutMs, 'result() timeoutMs', { allowZero: true, timer: true });
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    const timedOut = (why = '') => new TimeoutError(`Waiting for the result of run "${id}"${why}`, timeoutMs!);
    let pause = 5;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw timedOut();
      let fields: (string | null)[];
      try {
        const read = this.call(() => this.redis.hmget(this.keys.run(id), 'status', 'output', 'error', 'cancelReason'));
        fields = left === Infinity ? await read : await withTimeout(read, Math.min(left, this.commandTimeoutMs), this.health.address);
      } catch (error) {
        if (!(error instanceof RedisUnavailableError) || deadline === Infinity) throw error;
        if (Date.now() >= deadline) throw timedOut(` (Redis at ${this.health.address} did not answer)`);
        await sleep(Math.min(200, deadline - Date.now()));
        continue;
      }
      const [status, output, error, reason] = fields;
      if (status === null) throw new RunNotFoundError(id);
      if (status === 'succeeded') return decodeJson(output ?? '', id, 'output') as TOutput;
      if (status === 'failed') throw deserializeError(error ?? '');
      if (status === 'canceled') throw new CanceledError(id, reason ?? undefined);
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
      pause = Math.min(pause * 2, 200);
    }
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
