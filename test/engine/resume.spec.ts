import { RunNotResumableError, type WorkflowContext } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * `client.resume(runId)`: a failed or canceled run starts again in place, under the same id, from
 * its first incomplete step. Succeeded steps are not run again, attempts count on with a fresh
 * budget, and the run queues like any other, so flow control still holds.
 */
describe('resume', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;

  it('resume after a failure re-runs only the failed step', async () => {
    const calls = { a: 0, b: 0, c: 0 };
    let broken = true;
    const attempts: number[] = [];
    const order = engine.registry.define('order', { stepRetries: { maxAttempts: 1 } }, async ({ step, run }: WorkflowContext<{ id: string }>) => {
      attempts.push(run.attempt);
      const reserved = await step.run('a', () => ++calls.a);
      const charged = await step.run('b', () => {
        calls.b++;
        if (broken) throw new Error('the payment service is down');
        return 'charged';
      });
      const shipped = await step.run('c', () => ++calls.c);
      return { reserved, charged, shipped };
    });
    await engine.worker();
    const handle = await engine.client.start(order, { id: 'o-1' });
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('the payment service is down');
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', attempt: 1, maxAttempts: 1 });

    broken = false;
    expect(await engine.client.resume(handle.id)).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ reserved: 1, charged: 'charged', shipped: 1 });
    expect(calls).toEqual({ a: 1, b: 2, c: 1 });
    expect(attempts).toEqual([1, 2]);
    const run = await engine.client.getRun(handle.id);
    expect(run).toMatchObject({ id: handle.id, status: 'succeeded', attempt: 2, maxAttempts: 2, output: { reserved: 1, charged: 'charged', shipped: 1 } });
    expect(run?.error).toBeUndefined();
    // `attempt`: the run attempt that stored the step; `attempts`: its tries, counted on across the
    // resume (docs/guide/workflows-and-steps.md: "tries, the successful one included"): b failed at attempt 1 and succeeded at 2.
    const steps = await engine.client.getRunSteps(handle.id);
    expect(steps.map((s) => [s.name, s.status, s.attempt, s.attempts])).toEqual([
      ['a', 'succeeded', 1, 1],
      ['b', 'succeeded', 2, 2],
      ['c', 'succeeded', 2, 1],
    ]);
    expect(steps[1].lastError).toMatchObject({ message: 'the payment service is down' });
    // Counted once: the run left the failed index for good.
    expect(await engine.client.countRuns({ status: 'failed' })).toBe(0);
    expect(await engine.client.countRuns({ status: 'succeeded' })).toBe(1);
  });

  it("counts a step's attempts on across resume: its tries in every run attempt, and its retries get a fresh budget", async () => {
    let tries = 0;
    const sync = engine.registry.define('sync', {}, async ({ step }) =>
      step.run({ name: 'push', retries: { maxAttempts: 2, backoff: 'fixed', delay: 0 } }, () => {
        tries++;
        if (tries <= 3) throw new Error(`push failed (try ${tries})`);
        return tries;
      }),
    );
    await engine.worker();
    const handle = await engine.client.start(sync, {});
    // Attempt 1: both tries of the step's budget fail, and so does the run (maxAttempts 1).
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('push failed (try 2)');
    expect((await engine.client.getRunSteps(handle.id))[0]).toMatchObject({
      name: 'push',
      status: 'failed',
      attempt: 1,
      attempts: 2,
      lastError: { message: 'push failed (try 2)' },
    });

    // Attempt 2: the step's budget of 2 starts again; try 3 fails, try 4 succeeds.
    expect(await engine.client.resume(handle.id)).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe(4);
    expect(tries).toBe(4);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'succeeded', attempt: 2 });
    expect((await engine.client.getRunSteps(handle.id))[0]).toMatchObject({
      name: 'push',
      status: 'succeeded',
      attempt: 2,
      attempts: 4,
      lastError: { message: 'push failed (try 3)' },
    });
  });

  it('gives the run a fresh budget of its workflow maxAttempts, counted on from its last attempt', async () => {
    let failures = 3;
    const flaky = engine.registry.define('flaky', { retries: { maxAttempts: 2, delay: 0 }, stepRetries: { maxAttempts: 1 } }, async ({ step, run }) => {
      return step.run('call', () => {
        if (failures-- > 0) throw new Error(`failure at attempt ${run.attempt}`);
        return run.attempt;
      });
    });
    await engine.worker();
    const handle = await engine.client.start(flaky, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('failure at attempt 2');
    expect(await engine.client.resume(handle.id)).toBe(true);
    // Attempt 3 fails, attempt 4 (the second of the fresh budget of 2) succeeds.
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe(4);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'succeeded', attempt: 4, maxAttempts: 4 });
  });

  it('resumes a run canceled while it waited in step.waitFor; it then completes', async () => {
    const calls = { before: 0, after: 0 };
    const nap = engine.registry.define('nap', {}, async ({ step }) => {
      await step.run('before', () => ++calls.before);
      await step.sleep('nap', 200);
      return step.run('after', () => ++calls.after);
    });
    await engine.worker();
    const handle = await engine.client.start(nap, {});
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
    expect(await engine.client.cancelRun(handle.id, { reason: 'wrong address' })).toBe(true);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'canceled', cancelReason: 'wrong address' });

    expect(await engine.client.resume(handle.id)).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe(1);
    expect(calls).toEqual({ before: 1, after: 1 });
    const run = await engine.client.getRun(handle.id);
    expect(run).toMatchObject({ status: 'succeeded', attempt: 2, maxAttempts: 2 });
    expect(run?.cancelReason).toBeUndefined();
    expect(run?.error).toBeUndefined();
  });

  it('resumes a run canceled in a signal wait: it waits for the signal again and completes with it', async () => {
    const approval = engine.registry.define('approval', {}, async ({ step }) => {
      const decision = await step.waitForSignal<{ approved: boolean }>('await-approval', 'approval');
      return decision?.approved;
    });
    await engine.worker();
    const handle = await engine.client.start(approval, {});
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
    expect(await engine.client.cancelRun(handle.id)).toBe(true);
    // A canceled run takes no signal.
    expect(await engine.client.signal(handle.id, 'approval', { approved: false })).toBe(false);

    expect(await engine.client.resume(handle.id)).toBe(true);
    await eventually(async () => (await engine.client.getRunSteps(handle.id)).some((s) => s.status === 'waiting' && s.signal === 'approval'));
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
    expect(await engine.client.signal(handle.id, 'approval', { approved: true })).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe(true);
  });

  describe('a run that waited on a child run', () => {
    /** A parent waiting on its child, which waits for signal "go"; both scheduled, then canceled together. */
    const canceledWithChild = async () => {
      const child = engine.registry.define('child', {}, ({ step }) => step.waitForSignal<string>('await-go', 'go'));
      const parent = engine.registry.define('parent', { maxAttempts: 1 }, async ({ step }) => `got ${await step.runWorkflow('child', child, {})}`);
      await engine.worker({ concurrency: 4 });
      const handle = await engine.client.start(parent, {});
      const childId = `${handle.id}.child`;
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
      expect((await engine.client.getRunSteps(handle.id)).find((s) => s.name === 'child')?.childRunId).toBe(childId);
      expect(await engine.client.cancelRun(handle.id)).toBe(true);
      expect(await statusOf(childId)).toBe('canceled');
      return { handle, childId };
    };

    it('canceled with its child: resume the child, then the parent, which waits on the child again and completes with its result', async () => {
      const { handle, childId } = await canceledWithChild();

      expect(await engine.client.resume(childId)).toBe(true);
      expect(await engine.client.resume(handle.id)).toBe(true);
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
      expect(await engine.client.signal(childId, 'go', 'late')).toBe(true);
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('got late');
      expect(await engine.client.countRuns({ workflow: 'child' })).toBe(1);
    });

    it("canceled with its child, resumed alone: the child step fails at once with the child's CanceledError, instead of waiting forever", async () => {
      const { handle, childId } = await canceledWithChild();

      expect(await engine.client.resume(handle.id)).toBe(true);
      await expect(handle.result({ timeoutMs: 5_000 })).rejects.toMatchObject({
        name: 'CanceledError',
        message: expect.stringContaining(`Run "${childId}" was canceled because its parent run`),
      });
    });

    it('whose child was deleted meanwhile: the resumed parent starts the child again, as a failed step runs again, and completes', async () => {
      const { handle, childId } = await canceledWithChild();
      expect(await engine.client.deleteRun(childId)).toBe(true);

      expect(await engine.client.resume(handle.id)).toBe(true);
      await eventually(async () => (await statusOf(childId)) === 'scheduled');
      expect(await engine.client.signal(childId, 'go', 'again')).toBe(true);
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('got again');
    });
  });

  it('refuses a live or succeeded run, answers false for a missing one, and a second resume finds the run queued', async () => {
    let broken = true;
    const job = engine.registry.define('job', {}, ({ step }) =>
      step.run('work', () => {
        if (broken) throw new Error('broken');
        return 'done';
      }),
    );
    const worker = await engine.worker();
    const handle = await engine.client.start(job, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('broken');
    await worker.stop({ timeoutMs: 2_000 });

    expect(await engine.client.resume(handle.id)).toBe(true);
    expect(await statusOf(handle.id)).toBe('queued');
    const second = engine.client.resume(handle.id);
    await expect(second).rejects.toThrow(RunNotResumableError);
    await expect(engine.client.resume(handle.id)).rejects.toThrow(
      `Run "${handle.id}" is queued: only a failed, canceled, compensation_failed or terminated run can be resumed. Wait for it to end, or cancel it first (cancelRun) and then resume it.`,
    );
    await expect(engine.client.resume(handle.id)).rejects.toMatchObject({ name: 'RunNotResumableError', runId: handle.id, status: 'queued' });
    // Queued once: the second resume changed nothing.
    expect(await engine.redis.lrange(engine.client.keys.ready('default'), 0, -1)).toEqual([handle.id]);
    expect(await engine.client.countRuns({ status: 'queued' })).toBe(1);

    broken = false;
    await engine.worker();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('done');
    await expect(engine.client.resume(handle.id)).rejects.toThrow(
      `Run "${handle.id}" is succeeded: only a failed, canceled, compensation_failed or terminated run can be resumed. Use rerun() to run its workflow again as a new run.`,
    );

    expect(await engine.client.resume('no-such-run')).toBe(false);
    expect(await engine.client.resume('')).toBe(false);
    expect(await engine.client.resume(42 as unknown as string)).toBe(false);
  });

  it('passes through admission: with maxConcurrency 1 the resumed run waits parked until the slot is free', async () => {
    const gate = deferred();
    let inside = 0;
    let peak = 0;
    let failFirst = true;
    const single = engine.registry.define('single', { maxConcurrency: 1 }, async ({ step, input }: WorkflowContext<{ n: number }>) => {
      inside++;
      peak = Math.max(peak, inside);
      try {
        if (input.n === 1 && failFirst) {
          failFirst = false;
          throw new Error('first try fails');
        }
        if (input.n === 2) await gate.promise;
        return step.run('done', () => input.n);
      } finally {
        inside--;
      }
    });
    await engine.worker({ concurrency: 4 });
    const first = await engine.client.start(single, { n: 1 });
    await expect(first.result({ timeoutMs: 5_000 })).rejects.toThrow('first try fails');
    const holder = await engine.client.start(single, { n: 2 });
    await eventually(async () => (await statusOf(holder.id)) === 'running');

    expect(await engine.client.resume(first.id)).toBe(true);
    const parkedKey = `${engine.client.keys.base}wf:single:parked`;
    await eventually(async () => (await engine.redis.lrange(parkedKey, 0, -1)).join() === first.id);
    expect(await statusOf(first.id)).toBe('queued');

    gate.resolve();
    await expect(holder.result({ timeoutMs: 5_000 })).resolves.toBe(2);
    await expect(first.result({ timeoutMs: 5_000 })).resolves.toBe(1);
    expect(peak).toBe(1);
  });
});
