import {
  CanceledError,
  ConfigurationError,
  IdempotencyConflictError,
  NonRetriableError,
  RetryAfterError,
  TimeoutError,
  WorkflowRunError,
  type RunHandle,
  type RunState,
} from '../../lib';
import { deserializeError } from '../../lib/core/store/serialization';
import { deferred, eventually, TestEngine } from '../support/engine';

/** A run's error as `result()` rejects with it, and as `getRun` returns it (stored form and rebuilt). */
async function readBack(handle: RunHandle<unknown>): Promise<{ thrown: Error; state: RunState; rebuilt: Error }> {
  const thrown = await handle.result({ timeoutMs: 10_000 }).then(
    (value) => {
      throw new Error(`Run ${handle.id} succeeded with ${JSON.stringify(value)}; expected it to fail`);
    },
    (error: unknown) => error as Error,
  );
  const state = await handle.getState();
  if (!state?.error) throw new Error(`Run ${handle.id} has no stored error: ${JSON.stringify(state)}`);
  return { thrown, state, rebuilt: deserializeError(JSON.stringify(state.error)) };
}

describe('errors read back from Redis keep their class and typed fields', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('a step timeout: TimeoutError with .timeoutMs equal to the option', async () => {
    const wf = engine.registry.define('step-timeout', {}, async ({ step }) => {
      await step.run({ name: 'slow', timeoutMs: 50 }, ({ signal }) => {
        return new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, 5_000);
          signal.addEventListener('abort', () => {
            clearTimeout(timer);
            resolve();
          });
        });
      });
      return 'late';
    });
    await engine.worker();
    const handle = await engine.client.start(wf, {});
    const { thrown, state, rebuilt } = await readBack(handle);

    const message = 'Step "slow" timed out after 50 ms. Raise its timeout if it needs longer.';
    for (const error of [thrown, rebuilt]) {
      expect(error).toBeInstanceOf(TimeoutError);
      expect(error).toMatchObject({ name: 'TimeoutError', message, what: 'Step "slow"', timeoutMs: 50 });
    }
    expect(state).toMatchObject({ status: 'failed', attempt: 1 });
    expect(state.error).toMatchObject({ name: 'TimeoutError', message, fields: { what: 'Step "slow"', timeoutMs: 50 } });
    const steps = await engine.client.getRunSteps(handle.id);
    expect(steps.map((s) => [s.name, s.status, s.error?.name])).toEqual([['slow', 'failed', 'TimeoutError']]);
  });

  it('an IdempotencyConflictError thrown by a step: its class and existingRunId, after one attempt', async () => {
    const wf = engine.registry.define('conflicting', { maxAttempts: 3 }, async ({ step }) => {
      await step.run('start-other', () => {
        throw new IdempotencyConflictError('wf', 'k', 'id-1');
      });
    });
    await engine.worker();
    const { thrown, state, rebuilt } = await readBack(await engine.client.start(wf, {}));

    for (const error of [thrown, rebuilt]) {
      expect(error).toBeInstanceOf(IdempotencyConflictError);
      expect(error).toMatchObject({ workflow: 'wf', idempotencyKey: 'k', existingRunId: 'id-1' });
      expect(error.message).toBe(new IdempotencyConflictError('wf', 'k', 'id-1').message);
    }
    expect(state).toMatchObject({ status: 'failed', attempt: 1 });
    expect(state.error).toMatchObject({ name: 'IdempotencyConflictError', fields: { workflow: 'wf', idempotencyKey: 'k', existingRunId: 'id-1' } });
  });

  it('a canceled run: CanceledError with .runId and .reason', async () => {
    const started = deferred();
    const wf = engine.registry.define('cancel-me', {}, async ({ step }) => {
      await step.run('block', ({ signal }) => {
        started.resolve();
        return new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve()));
      });
      return 'not canceled';
    });
    const worker = await engine.worker();
    const handle = await engine.client.start(wf, {});
    await started.promise;
    expect(await engine.client.cancelRun(handle.id, { reason: 'no longer needed' })).toBe(true);
    const { thrown, state, rebuilt } = await readBack(handle);

    for (const error of [thrown, rebuilt]) {
      expect(error).toBeInstanceOf(CanceledError);
      expect(error).toMatchObject({ runId: handle.id, reason: 'no longer needed', message: `Run "${handle.id}" was canceled: no longer needed.` });
    }
    expect(state).toMatchObject({ status: 'canceled', cancelReason: 'no longer needed', attempt: 1 });
    expect(state.error).toMatchObject({ name: 'CanceledError', fields: { runId: handle.id, reason: 'no longer needed' } });
    // The worker lets go of the run without changing it.
    await eventually(() => worker.activeRunIds.length === 0);
    expect(await handle.getState()).toMatchObject({ status: 'canceled' });
  });

  describe('retries', () => {
    const attemptsOf = (calls: Map<string, number>, id: string) => calls.get(id) ?? 0;

    it('a thrown ConfigurationError fails after exactly 1 attempt of 3: it is never retried', async () => {
      const calls = new Map<string, number>();
      const wf = engine.registry.define('misconfigured', { maxAttempts: 3 }, ({ run }) => {
        calls.set(run.id, attemptsOf(calls, run.id) + 1);
        throw new ConfigurationError('the API key option is missing');
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const { thrown, state, rebuilt } = await readBack(handle);

      for (const error of [thrown, rebuilt]) {
        expect(error).toBeInstanceOf(ConfigurationError);
        expect(error).toMatchObject({ name: 'ConfigurationError', message: 'the API key option is missing' });
      }
      expect(state).toMatchObject({ status: 'failed', attempt: 1, maxAttempts: 3, error: { name: 'ConfigurationError' } });
      expect(attemptsOf(calls, handle.id)).toBe(1);
    });

    it('a NonRetriableError fails after 1 attempt of 3', async () => {
      const calls = new Map<string, number>();
      const wf = engine.registry.define('permanent', { maxAttempts: 3 }, ({ run }) => {
        calls.set(run.id, attemptsOf(calls, run.id) + 1);
        throw new NonRetriableError('card declined');
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const { thrown, state, rebuilt } = await readBack(handle);

      for (const error of [thrown, rebuilt]) {
        expect(error).toBeInstanceOf(NonRetriableError);
        expect(error).toMatchObject({ name: 'NonRetriableError', message: 'card declined' });
      }
      expect(state).toMatchObject({ status: 'failed', attempt: 1, maxAttempts: 3 });
      expect(attemptsOf(calls, handle.id)).toBe(1);
    });

    it('a plain Error is retried to the last of 3 attempts and reads back as WorkflowRunError with originalName "Error"', async () => {
      const calls = new Map<string, number>();
      const wf = engine.registry.define('flaky', { retries: { maxAttempts: 3, delay: 10 } }, ({ run }) => {
        calls.set(run.id, attemptsOf(calls, run.id) + 1);
        throw new Error(`boom on attempt ${run.attempt}`);
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const { thrown, state, rebuilt } = await readBack(handle);

      for (const error of [thrown, rebuilt]) {
        expect(error).toBeInstanceOf(WorkflowRunError);
        expect(error).toMatchObject({ name: 'Error', message: 'boom on attempt 3', originalName: 'Error' });
      }
      expect(state).toMatchObject({ status: 'failed', attempt: 3, maxAttempts: 3 });
      expect(state.error).toMatchObject({ name: 'Error', message: 'boom on attempt 3' });
      expect(state.error).not.toHaveProperty('fields');
      expect(attemptsOf(calls, handle.id)).toBe(3);
    });

    it('a RetryAfterError with a bad delay fails its attempt with a TypeError, which is retried: the run succeeds on attempt 2', async () => {
      const seen: unknown[] = [];
      const wf = engine.registry.define(
        'bad-delay',
        {
          retries: {
            maxAttempts: 3,
            delay: 10,
            shouldRetry: ({ error }) => {
              seen.push(error);
              return true;
            },
          },
        },
        ({ run }) => {
          if (run.attempt === 1) throw new RetryAfterError('later', -1);
          return 'ok';
        },
      );
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      await expect(handle.result({ timeoutMs: 10_000 })).resolves.toBe('ok');

      expect(seen).toHaveLength(1);
      expect(seen[0]).toBeInstanceOf(TypeError);
      expect(seen[0]).not.toBeInstanceOf(RetryAfterError);
      expect((seen[0] as Error).message).toMatch(/^RetryAfterError delay -1 is not valid\./);
      const state = await handle.getState();
      expect(state).toMatchObject({ status: 'succeeded', attempt: 2, output: 'ok' });
      // A succeeded run has no error; the failed attempt's error is stored as the ordinary TypeError it was.
      expect(state?.error).toBeUndefined();
      const stored = JSON.parse((await engine.redis.hget(engine.client.keys.run(handle.id), 'error'))!);
      expect(stored).toMatchObject({ name: 'TypeError', message: (seen[0] as Error).message });
      const rebuilt = deserializeError(JSON.stringify(stored));
      expect(rebuilt).toBeInstanceOf(WorkflowRunError);
      expect(rebuilt).toMatchObject({ originalName: 'TypeError' });
    });
  });
});
