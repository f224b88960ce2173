import { IsString } from 'class-validator';

import {
  CanceledError,
  CorruptRunDataError,
  NonRetriableError,
  OutputSerializationError,
  PayloadTooLargeError,
  RetryAfterError,
  RunCrashedError,
  RunStalledError,
  TimeoutError,
  UnknownWorkflowError,
  WorkflowRegistry,
  WorkflowRunError,
} from '../../lib';
import { countScriptCalls, deferred, eventually, TestEngine } from '../support/engine';

class UserDto {
  @IsString() userId!: string;
  describe(): string {
    return `user ${this.userId}`;
  }
}

describe('worker', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  describe('durable steps', () => {
    it('does not run a completed step again when a later attempt retries', async () => {
      let charges = 0;
      const wf = engine.registry.define('checkout', { retries: { maxAttempts: 3, delay: 10 } }, async ({ step, run }) => {
        const charge = await step.run({ name: 'charge' }, () => ({ chargeId: `ch_${++charges}` }));
        if (run.attempt < 3) throw new Error(`flaky on attempt ${run.attempt}`);
        return charge;
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toEqual({ chargeId: 'ch_1' });
      expect(charges).toBe(1);
      const state = await handle.getState();
      // Earlier attempts' errors are not the succeeded run's (run-truth.spec.ts).
      expect(state).toMatchObject({ status: 'succeeded', attempt: 3 });
      expect(state!.error).toBeUndefined();
    });

    it('names repeated steps charge, charge#2, charge#3 so loops replay', async () => {
      const calls: number[] = [];
      const wf = engine.registry.define('loop', { retries: { maxAttempts: 2, delay: 5 } }, async ({ step, run }) => {
        const out: number[] = [];
        for (let i = 0; i < 3; i++) out.push(await step.run('item', () => (calls.push(i), i * 10)));
        if (run.attempt === 1) throw new Error('retry me');
        return out;
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toEqual([0, 10, 20]);
      expect(calls).toEqual([0, 1, 2]);
      expect((await engine.client.getRunSteps(handle.id)).map((s) => s.name)).toEqual(['item', 'item#2', 'item#3']);
    });

    it('runs parallel steps concurrently and persists each one', async () => {
      const bothStarted = { a: deferred(), b: deferred() };
      const wf = engine.registry.define('parallel', {}, async ({ step }) => {
        const [a, b] = await Promise.all([
          step.run('a', async () => {
            bothStarted.a.resolve();
            await bothStarted.b.promise;
            return 'A';
          }),
          step.run('b', async () => {
            bothStarted.b.resolve();
            await bothStarted.a.promise;
            return 'B';
          }),
        ]);
        return a + b;
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe('AB');
      expect((await engine.client.getRunSteps(handle.id)).map((s) => s.name).sort()).toEqual(['a', 'b']);
    });

    it('aborts sibling branches when one fails for good and reports that branch', async () => {
      let siblingSignal: AbortSignal | undefined;
      const wf = engine.registry.define('fail-fast', {}, async ({ step }) => {
        await Promise.all([
          step.run('slow', ({ signal }) => {
            siblingSignal = signal;
            return new Promise((resolve) => setTimeout(resolve, 5_000));
          }),
          step.run('broken', async () => {
            await new Promise((r) => setTimeout(r, 5));
            throw new NonRetriableError('card declined');
          }),
        ]);
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const error = await handle.result({ timeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NonRetriableError);
      expect((error as Error).message).toBe('card declined');
      expect(siblingSignal?.aborted).toBe(true);
      const steps = await engine.client.getRunSteps(handle.id);
      expect(steps).toEqual([expect.objectContaining({ name: 'broken', status: 'failed', error: expect.objectContaining({ message: 'card declined' }) })]);
    });

    it('fails an attempt with TimeoutError when a step exceeds timeoutMs, aborting its signal', async () => {
      let stepSignal: AbortSignal | undefined;
      const wf = engine.registry.define('timeout', {}, async ({ step }) => {
        await step.run({ name: 'hang', timeoutMs: 50, retries: { maxAttempts: 1 } }, ({ signal }) => {
          stepSignal = signal;
          return new Promise(() => undefined);
        });
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const error = await handle.result({ timeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TimeoutError);
      expect((error as Error).message).toBe('Step "hang" timed out after 50 ms. Raise its timeout if it needs longer.');
      expect(stepSignal?.aborted).toBe(true);
    });
  });

  describe('retries and failure', () => {
    it('waits the delay RetryAfterError asks for before the next attempt', async () => {
      const wf = engine.registry.define('retry-after', { maxAttempts: 2 }, ({ run }) => {
        if (run.attempt === 1) throw new RetryAfterError('rate limited', '300ms');
        return run.attempt;
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      await eventually(async () => (await handle.getState())?.status === 'scheduled');
      const scheduled = (await handle.getState())!;
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe(2);
      const done = (await handle.getState())!;
      expect(scheduled.error).toMatchObject({ name: 'RetryAfterError', message: 'rate limited' });
      // The second attempt ran once due; startedAt stays the run's first start.
      expect(done.finishedAt! - scheduled.availableAt).toBeGreaterThanOrEqual(0);
      expect(scheduled.availableAt - scheduled.startedAt!).toBeGreaterThanOrEqual(300);
      expect(done.startedAt).toBe(scheduled.startedAt);
    });

    it('fails at once on NonRetriableError and calls onFailure exactly once', async () => {
      const failures: unknown[] = [];
      const wf = engine.registry.define(
        'non-retriable',
        { maxAttempts: 5, onFailure: ({ error, run, input }) => void failures.push([(error as Error).message, run.attempt, input]) },
        () => {
          throw new NonRetriableError('invoice not found');
        },
      );
      await engine.worker();
      const handle = await engine.client.start(wf, { invoice: 7 });
      await expect(handle.result({ timeoutMs: 5000 })).rejects.toThrow(NonRetriableError);
      expect(await handle.getState()).toMatchObject({ status: 'failed', attempt: 1 });
      await eventually(() => failures.length === 1);
      expect(failures).toEqual([['invoice not found', 1, { invoice: 7 }]]);
    });

    it('retries until maxAttempts, then fails with the last error and calls onFailure once', async () => {
      let onFailureCalls = 0;
      const wf = engine.registry.define(
        'always-fails',
        { retries: { maxAttempts: 3, delay: () => '5ms' }, onFailure: () => void onFailureCalls++ },
        ({ run }) => {
          throw new Error(`boom ${run.attempt}`);
        },
      );
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const error = await handle.result({ timeoutMs: 5000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(WorkflowRunError);
      expect(error).toMatchObject({ name: 'Error', message: 'boom 3' });
      expect(await handle.getState()).toMatchObject({ status: 'failed', attempt: 3 });
      await eventually(() => onFailureCalls === 1);
      expect(onFailureCalls).toBe(1);
    });

    it('fails at once when shouldRetry says no', async () => {
      const wf = engine.registry.define(
        'should-retry',
        { retries: { maxAttempts: 4, shouldRetry: ({ error }) => (error as Error).message !== 'bad input' } },
        () => {
          throw new Error('bad input');
        },
      );
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      await expect(handle.result({ timeoutMs: 5000 })).rejects.toThrow('bad input');
      expect((await handle.getState())?.attempt).toBe(1);
    });
  });

  describe('cancellation', () => {
    it('aborts a running run promptly, starts no later step and ends canceled', async () => {
      const started = deferred();
      let secondStepRan = false;
      let stepSignal: AbortSignal | undefined;
      const wf = engine.registry.define('cancel-me', {}, async ({ step }) => {
        await step.run('wait', ({ signal }) => {
          stepSignal = signal;
          started.resolve();
          return new Promise(() => undefined); // ignores the signal: the runtime must not wait for it
        });
        await step.run('after', () => (secondStepRan = true));
      });
      const worker = await engine.worker();
      const handle = await engine.client.start(wf, {});
      await started.promise;
      expect((await engine.client.listRuns({ status: 'running' })).map((r) => r.id)).toEqual([handle.id]);
      expect((await engine.client.listRuns())[0]).toMatchObject({ id: handle.id, status: 'running' });
      const t0 = Date.now();
      expect(await engine.client.cancelRun(handle.id, { reason: 'user asked' })).toBe(true);
      await expect(handle.result({ timeoutMs: 2000 })).rejects.toThrow(CanceledError);
      await eventually(() => stepSignal?.aborted && worker.activeRunIds.length === 0, 2000);
      expect(Date.now() - t0).toBeLessThan(1000);
      expect(secondStepRan).toBe(false);
      expect(await handle.getState()).toMatchObject({ status: 'canceled', cancelReason: 'user asked' });
      expect(await engine.client.cancelRun(handle.id)).toBe(false);
    });
  });

  describe('scheduling and lifecycle', () => {
    it('starts a run enqueued while the worker blocks, without waiting for a poll', async () => {
      const wf = engine.registry.define('pickup', {}, () => 'picked');
      await engine.worker({ runtime: { blockTimeoutMs: 30_000 } });
      await new Promise((r) => setTimeout(r, 50)); // let the loop reach its blocking wait
      const handle = await engine.client.start(wf, {});
      await expect(handle.result({ timeoutMs: 2000 })).resolves.toBe('picked');
    });

    it('keeps a delayed run scheduled until runAt', async () => {
      const wf = engine.registry.define('delayed', {}, () => Date.now());
      await engine.worker();
      const runAt = Date.now() + 200;
      const handle = await engine.client.start(wf, {}, { runAt: new Date(runAt) });
      expect((await handle.getState())?.status).toBe('scheduled');
      const startedAt = await handle.result({ timeoutMs: 3000 });
      expect(startedAt).toBeGreaterThanOrEqual(runAt);
    });

    it('never runs more handlers at once than its concurrency', async () => {
      let running = 0;
      let peak = 0;
      const wf = engine.registry.define('limited', { maxConcurrency: Infinity }, async () => {
        peak = Math.max(peak, ++running);
        await new Promise((r) => setTimeout(r, 10));
        running--;
      });
      await engine.worker({ concurrency: 2 });
      const handles = await Promise.all(Array.from({ length: 10 }, () => engine.client.start(wf, {})));
      await Promise.all(handles.map((h) => h.result({ timeoutMs: 5000 })));
      expect(peak).toBe(2);
    });

    it('stop() lets in-flight runs finish, claims nothing new, and is safe to call twice', async () => {
      const release = deferred();
      const started = deferred();
      const wf = engine.registry.define('drain', {}, async () => {
        started.resolve();
        await release.promise;
        return 'done';
      });
      const worker = await engine.worker({ concurrency: 1 });
      const first = await engine.client.start(wf, {});
      await started.promise;
      const second = await engine.client.start(wf, {});
      const stopping = worker.stop({ timeoutMs: 5000 });
      const stoppingAgain = worker.stop({ timeoutMs: 5000 });
      release.resolve();
      await Promise.all([stopping, stoppingAgain]);
      expect((await first.getState())?.status).toBe('succeeded');
      expect((await second.getState())?.status).toBe('queued');
    });

    it('leaves a run that outlives stop({ timeoutMs }) to another worker, which resumes after its last step', async () => {
      let firstStepRuns = 0;
      const hang = deferred();
      const wf = engine.registry.define('handover', {}, async ({ step }) => {
        await step.run('first', () => ++firstStepRuns);
        await step.run('second', async () => {
          if (firstStepRuns === 1 && hang) {
            hang.resolve();
            await new Promise((r) => setTimeout(r, 3_000));
          }
          return 'second';
        });
        return 'ok';
      });
      const w1 = await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(wf, {});
      await hang.promise;
      await w1.stop({ timeoutMs: 20 });
      expect((await handle.getState())?.status).toBe('running');
      await engine.worker({ concurrency: 1 });
      await expect(handle.result({ timeoutMs: 8000 })).resolves.toBe('ok');
      expect(firstStepRuns).toBe(1);
    });
  });

  describe('runs that keep killing their worker', () => {
    it('fails a run with RunCrashedError (a RunStalledError) once its lease expired more than maxRecoveries times in a row', async () => {
      const wf = engine.registry.define('poison', {}, () => 1);
      const handle = await engine.client.start(wf, {});
      const { scripts } = engine.client;
      // Each round: a worker claims the run with a 1 ms lease and "dies"; the reaper finds it expired.
      for (let round = 1; round <= 3; round++) {
        const claimed = await scripts.claim('default', `dead-worker:${round}`, Date.now(), 1);
        expect(claimed?.runId).toBe(handle.id);
        expect(await scripts.reap(Date.now() + 10, 100, 2)).toEqual([handle.id]);
        expect((await handle.getState())?.status).toBe(round <= 2 ? 'queued' : 'failed');
      }
      const error = await handle.result({ timeoutMs: 1000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RunStalledError);
      expect(error).toBeInstanceOf(RunCrashedError);
      expect(error).toMatchObject({ runId: handle.id, crashes: 3, workerId: 'dead-worker', message: new RunCrashedError(handle.id, 3, 'dead-worker').message });
      expect(await handle.getState()).toMatchObject({ status: 'failed', attempt: 1 });
      expect(await engine.redis.zscore(engine.client.keys.leases(), handle.id)).toBeNull();
    });
  });

  describe('bad data and bad output', () => {
    it('fails a run with corrupt input JSON and keeps serving others', async () => {
      const wf = engine.registry.define('fragile', {}, ({ input }) => input);
      const bad = await engine.client.start(wf, { ok: 1 });
      await engine.redis.hset(engine.client.keys.run(bad.id), 'input', '{not json');
      const good = await engine.client.start(wf, { ok: 2 });
      await engine.worker({ concurrency: 1 });
      const error = await bad.result({ timeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorruptRunDataError);
      expect((error as Error).message).toBe(
        `Run "${bad.id}" has corrupt data in Redis (field "input" is not valid JSON). The run cannot continue; start a new run.`,
      );
      await expect(good.result({ timeoutMs: 3000 })).resolves.toEqual({ ok: 2 });
    });

    it('ends a child normally when its waiting parent holds a damaged record; the parent fails with CorruptRunDataError', async () => {
      const release = deferred();
      const child = engine.registry.define('garbled-child', {}, async ({ step }) => {
        await step.run('hold', () => release.promise);
        return 'child done';
      });
      const parent = engine.registry.define('garbled-parent', {}, ({ step }) => step.runWorkflow('invoke', child, {}));
      await engine.worker({ concurrency: 2 });
      const handle = await engine.client.start(parent, {});
      const childId = `${handle.id}.invoke`;
      await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
      // The parent's waiting record is damaged while the child runs.
      await engine.redis.hset(engine.client.keys.run(handle.id), 's:invoke', '[3,1');
      release.resolve();
      await expect(engine.client.handle(childId).result({ timeoutMs: 3000 })).resolves.toBe('child done');
      const error = await handle.result({ timeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(CorruptRunDataError);
      expect((error as Error).message).toContain('step "invoke"');
    });

    it('fails a run whose hash lost its fields', async () => {
      const wf = engine.registry.define('stripped', {}, () => 1);
      const bad = await engine.client.start(wf, {});
      await engine.redis.hdel(engine.client.keys.run(bad.id), 'workflow');
      await engine.worker();
      await eventually(async () => (await engine.redis.hget(engine.client.keys.run(bad.id), 'status')) === 'failed');
      const error = JSON.parse((await engine.redis.hget(engine.client.keys.run(bad.id), 'error'))!);
      expect(error).toMatchObject({ name: 'CorruptRunDataError' });
    });

    it('fails a run whose output is not JSON with OutputSerializationError', async () => {
      const wf = engine.registry.define('bigint', { maxAttempts: 3 }, () => ({ total: BigInt(1) }));
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const error = await handle.result({ timeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(OutputSerializationError);
      expect((error as Error).message).toBe(
        'The output of workflow "bigint" cannot be stored as JSON: $.total is a BigInt (JSON cannot store BigInts; store it as a string). Use plain JSON data: objects, arrays, strings, numbers, booleans, null or Dates (stored as ISO strings).',
      );
      expect((await handle.getState())?.attempt).toBe(1);
    });

    it('fails a step whose output is over maxPayloadBytes with PayloadTooLargeError', async () => {
      const wf = engine.registry.define('huge-step', {}, async ({ step }) => {
        await step.run('huge', () => 'x'.repeat(300));
      });
      await engine.worker({ maxPayloadBytes: 256 });
      const handle = await engine.client.start(wf, {});
      await expect(handle.result({ timeoutMs: 3000 })).rejects.toThrow(PayloadTooLargeError);
      await expect(handle.result()).rejects.toThrow('The output of step "huge" is 302 bytes, over the 256-byte limit.');
    });

    it('fails a run of a workflow this worker does not define', async () => {
      const remote = new WorkflowRegistry();
      remote.define('elsewhere', {}, () => 1);
      await engine.client.syncRegistry(remote, { owner: 'other-app' });
      const handle = await engine.client.runByName('elsewhere', {});
      engine.registry.define('here', {}, () => 1);
      await engine.worker();
      const error = await handle.result({ timeoutMs: 3000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(UnknownWorkflowError);
      expect((error as Error).message).toMatch(/^Workflow "elsewhere" is not registered in worker "test-app", which serves queue "default"\./);
    });

    it('validates input again in the worker and hands a DTO instance to the handler', async () => {
      const wf = engine.registry.define('dto', { schema: UserDto }, ({ input }) => (input instanceof UserDto ? input.describe() : 'plain object'));
      const ok = await engine.client.start(wf, { userId: 'u1' } as UserDto);
      const bad = await engine.client.start(wf, { userId: 'u2' } as UserDto);
      await engine.redis.hset(engine.client.keys.run(bad.id), 'input', '{"userId":5}');
      await engine.worker();
      await expect(ok.result({ timeoutMs: 3000 })).resolves.toBe('user u1');
      await expect(bad.result({ timeoutMs: 3000 })).rejects.toThrow('Input for workflow "dto" is invalid: userId: userId must be a string.');
    });
  });

  describe('round trips', () => {
    // Runs are queued before the worker starts, so each finish claims the next run: per run, the
    // budget is one checkpoint per step but the last, plus one finish carrying the last step.
    it.each([
      [1, 0],
      [3, 2],
    ])('a %i-step run costs %i checkpoint(s) and one finish, with no separate claim while busy', async (stepCount, checkpointsPerRun) => {
      const wf = engine.registry.define(`budget-${stepCount}`, {}, async ({ step }) => {
        let sum = 0;
        for (let i = 0; i < stepCount; i++) sum += await step.run(`s${i}`, () => i + 1);
        return sum;
      });
      const runs = 5;
      const handles = await Promise.all(Array.from({ length: runs }, () => engine.client.start(wf, {})));
      const counts = countScriptCalls(engine.redis);
      await engine.worker({ concurrency: 1, runtime: { leaseMs: 120_000, heartbeatMs: 60_000, reaperIntervalMs: 60_000, blockTimeoutMs: 60_000 } });
      for (const h of handles) await h.result({ timeoutMs: 5000 });
      expect(counts.checkpoint ?? 0).toBe(runs * checkpointsPerRun);
      expect(counts.finish).toBe(runs);
      // One claim by the queue loop for the first run, one more after the queue drained.
      await eventually(() => counts.claim === 2);
      expect(counts.claim).toBe(2);
      const steps = await engine.client.getRunSteps(handles[0].id);
      expect(steps.map((s) => [s.name, s.output])).toEqual(Array.from({ length: stepCount }, (_, i) => [`s${i}`, i + 1]));
    });
  });
});
