import { assertKnownKeys, checkUserName, optionKeys, renamedDuration } from '../definition/option-checks';
import type { GetRunEventOptions, WaitForRunOptions } from '../definition/run-options';
import {
  TERMINAL_STATUSES,
  type FinalStatus,
  type ResultOptions,
  type RunHandle,
  type RunOutcome,
  type RunState,
  type RunStatus,
} from '../definition/run-types';
import { CanceledError, ClientClosedError, RedisUnavailableError, RunNotFoundError, TimeoutError } from '../errors';
import type { Payloads } from '../store/payloads';
import type { EndedRun } from '../store/run-queries';
import { deserializeError } from '../store/serialization';
import { isPossibleRunId, sleep, type ClientContext } from './client-context';
import { RunEndWatcher } from './run-end-watcher';

/** The final state of a run from its status and payload (output JSON, error JSON or cancel reason). */
function toOutcome<TOutput>(id: string, status: FinalStatus, payload: string, payloads: Payloads): RunOutcome<TOutput> {
  if (status === 'succeeded') return { runId: id, status, output: payloads.openText(payload, 'output', { kind: 'output', runId: id }) as TOutput };
  if (status === 'failed' || status === 'compensation_failed' || status === 'terminated') return { runId: id, status, error: deserializeError(payload) };
  return { runId: id, status, error: new CanceledError(id, payload || undefined), reason: payload || undefined };
}

function isAbortSignal(value: unknown): value is AbortSignal {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as AbortSignal).aborted === 'boolean' &&
    typeof (value as AbortSignal).addEventListener === 'function'
  );
}

/** How long `getRunEvent` waits by default. */
const GET_RUN_EVENT_TIMEOUT_MS = 60_000;

const RESULT_OPTION_KEYS = optionKeys<ResultOptions>()(['timeout', 'timeoutMs', 'signal']);
const WAIT_FOR_RUN_OPTION_KEYS = optionKeys<WaitForRunOptions>()(['timeout', 'timeoutMs', 'signal', 'throwOnFailure']);
const GET_RUN_EVENT_OPTION_KEYS = optionKeys<GetRunEventOptions>()(['timeout', 'timeoutMs']);

/** The `timeout` (or deprecated `timeoutMs`) of a wait in ms, checked; undefined when not given. */
function waitTimeout(options: { timeout?: unknown; timeoutMs?: unknown } | undefined, call: string): number | undefined {
  return renamedDuration(options, { name: 'timeout', deprecated: 'timeoutMs', label: (key) => `${call} ${key}`, allowZero: true, timer: true });
}

/**
 * Waiting for runs: `handle(id)`, a run's result (woken by its end message, see RunEndWatcher),
 * and the values it publishes. Its public methods are documented where `WorkflowClient` forwards
 * to them.
 */
export class RunWaiter {
  private watcher: RunEndWatcher | undefined;

  constructor(
    private readonly ctx: ClientContext,
    /** Reads a run (RunReader.getRun): a handle's `getState`. */
    private readonly getRun: <TOutput>(id: string) => Promise<RunState<TOutput> | null>,
  ) {}

  handle<TOutput = unknown>(id: string): RunHandle<TOutput> {
    return {
      id,
      getState: () => this.getRun<TOutput>(id),
      result: async (options) => {
        assertKnownKeys('result() options', options, RESULT_OPTION_KEYS);
        if (options?.signal !== undefined && !isAbortSignal(options.signal)) throw new TypeError('result() option "signal" must be an AbortSignal.');
        return this.waitForResult<TOutput>(id, waitTimeout(options, 'result()'), options?.signal);
      },
    };
  }

  /**
   * Cost: one read of the run, then nothing until the run's end message arrives (it carries the
   * result, up to 64 KiB; a larger one is read once more). See RunEndWatcher.
   */
  async waitForRun<TOutput = unknown>(id: string, options: WaitForRunOptions = {}): Promise<TOutput | RunOutcome<TOutput>> {
    assertKnownKeys('waitForRun options', options, WAIT_FOR_RUN_OPTION_KEYS);
    if (options.signal !== undefined && !isAbortSignal(options.signal)) throw new TypeError('waitForRun option "signal" must be an AbortSignal.');
    if (options.throwOnFailure !== undefined && typeof options.throwOnFailure !== 'boolean')
      throw new TypeError('waitForRun option "throwOnFailure" must be true or false.');
    const outcome = await this.awaitEnd<TOutput>(id, waitTimeout(options, 'waitForRun'), options.signal);
    if (options.throwOnFailure === false) return outcome;
    if (outcome.status === 'succeeded') return outcome.output;
    throw outcome.error;
  }

  /** `handle.result()`: the output, or the run's error. */
  private async waitForResult<TOutput>(id: string, timeoutMs?: number, signal?: AbortSignal): Promise<TOutput> {
    const outcome = await this.awaitEnd<TOutput>(id, timeoutMs, signal);
    if (outcome.status === 'succeeded') return outcome.output;
    throw outcome.error;
  }

  private get endWatcher(): RunEndWatcher {
    this.watcher ??= new RunEndWatcher(this.ctx.redis, this.ctx.keys.endedChannel(), this.ctx.health, (ids) => this.readEnded(ids));
    return this.watcher;
  }

  /** The ended ones of runs `ids`, read 1,000 per round trip. */
  private async readEnded(ids: string[]): Promise<Map<string, EndedRun>> {
    const ended = new Map<string, EndedRun>();
    for (let i = 0; i < ids.length; i += 1_000) {
      const chunk = ids.slice(i, i + 1_000);
      for (const [id, run] of await this.ctx.call(() => this.ctx.runQueries.ended(chunk))) ended.set(id, run);
    }
    return ended;
  }

  /**
   * Listens for the run's end message, then reads the run once (it may have ended before the
   * subscription), then waits for the message. Settles once, whatever comes first: the end, the
   * deadline, the abort, or an error.
   */
  private awaitEnd<TOutput>(id: string, timeoutMs: number | undefined, signal: AbortSignal | undefined): Promise<RunOutcome<TOutput>> {
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
          outcome = toOutcome<TOutput>(id, run.status, run.payload, this.ctx.payloads);
        } catch (error) {
          return fail(error);
        }
        settle(() => resolve(outcome));
      };
      stop = watcher.listen(id, ended, () => fail(new ClientClosedError(`Waiting for the result of run "${id}"`)));
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) {
        timer = setTimeout(
          () =>
            fail(
              new TimeoutError(`Waiting for the result of run "${id}"${redisSilent ? ` (Redis at ${this.ctx.health.address} did not answer)` : ''}`, timeoutMs),
            ),
          timeoutMs,
        );
      }
      const firstRead = async () => {
        for (;;) {
          try {
            await this.ctx.call(() => watcher.subscribe());
            const run = await this.ctx.call(() => this.ctx.runQueries.end(id));
            if (run === 'missing') return fail(new RunNotFoundError(id));
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

  /** Stops the waits still pending (`ClientClosedError`) and closes the end watcher's subscriber. */
  async close(): Promise<void> {
    await this.watcher?.close();
  }

  /** Polls the run, backing off from 10 ms to 250 ms, until the value, its end or the deadline. */
  async getRunEvent<T = unknown>(runId: string, key: string, options: GetRunEventOptions = {}): Promise<T | null> {
    assertKnownKeys('getRunEvent options', options, GET_RUN_EVENT_OPTION_KEYS);
    checkUserName(key, 'The key of getRunEvent');
    const timeoutMs = waitTimeout(options, 'getRunEvent') ?? GET_RUN_EVENT_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    let pause = 10;
    for (;;) {
      const { status, value, field } = isPossibleRunId(runId)
        ? await this.ctx.call(() => this.ctx.runQueries.published(runId, key))
        : { status: null, value: null, field: '' };
      if (status === null) throw new RunNotFoundError(runId);
      if (value !== null) return this.ctx.payloads.openText(value, field, { kind: 'value', runId }) as T;
      if (TERMINAL_STATUSES.has(status as RunStatus) || Date.now() >= deadline) return null;
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
      pause = Math.min(pause * 2, 250);
    }
  }
}
