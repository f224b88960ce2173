import { CanceledError, NonRetriableError, TimeoutError, type WorkflowContext } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * Durable waits (step.waitFor) and child runs (step.runWorkflow / step.emitWorkflow): a waiting run
 * is `scheduled`, holds no worker slot and uses no attempt; children are started once per parent
 * step, linked to their parent, and canceled with it.
 */
describe('durable waits and child workflows', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const stateOf = async (id: string) => (await engine.client.getRun(id))!;
  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;
  const parentField = (id: string) => engine.redis.hget(engine.client.keys.run(id), 'parent');

  describe('step.waitFor', () => {
    it('parks the run as scheduled without a worker slot or an attempt, and resumes after the wake time without replaying earlier steps', async () => {
      let beforeRuns = 0;
      let afterRuns = 0;
      const seenAttempts: number[] = [];
      let resumedAt = 0;
      const napper = engine.registry.define('napper', {}, async ({ step, run }) => {
        seenAttempts.push(run.attempt);
        const before = await step.run('before', () => ++beforeRuns);
        await step.sleep('nap', 400);
        resumedAt = Date.now();
        const after = await step.run('after', () => ++afterRuns);
        return { before, after, attempt: run.attempt };
      });
      const other = engine.registry.define('other', {}, () => 'other done');
      const worker = await engine.worker({ concurrency: 1 });

      const t0 = Date.now();
      const handle = await engine.client.start(napper, {});
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
      const reachedBy = Date.now();

      const steps = await engine.client.getRunSteps(handle.id);
      expect(steps).toEqual([
        expect.objectContaining({ name: 'before', status: 'succeeded', seq: 1, attempt: 1, output: 1 }),
        { name: 'nap', status: 'waiting', seq: 2, attempt: 1, wakeAt: expect.any(Number), startedAt: expect.any(Number) },
      ]);
      const wakeAt = steps[1].wakeAt!;
      expect(wakeAt).toBeGreaterThanOrEqual(t0 + 400);
      expect(wakeAt).toBeLessThanOrEqual(reachedBy + 400);
      expect(await stateOf(handle.id)).toMatchObject({ status: 'scheduled', availableAt: wakeAt });
      expect(Number(await engine.redis.zscore(engine.client.keys.scheduled('default'), handle.id))).toBe(wakeAt);

      // No slot is held while waiting: a run of another workflow completes on the single slot.
      await eventually(() => worker.activeRunIds.length === 0);
      expect(worker.activeRunIds).toEqual([]);
      const otherHandle = await engine.client.start(other, {});
      await expect(otherHandle.result({ timeoutMs: 3000 })).resolves.toBe('other done');
      expect((await stateOf(otherHandle.id)).finishedAt!).toBeLessThan(wakeAt);
      expect(await statusOf(handle.id)).toBe('scheduled');

      await expect(handle.result({ timeoutMs: 5000 })).resolves.toEqual({ before: 1, after: 1, attempt: 1 });
      expect(beforeRuns).toBe(1);
      expect(afterRuns).toBe(1);
      expect(seenAttempts).toEqual([1, 1]);
      expect(resumedAt).toBeGreaterThanOrEqual(wakeAt);
      const done = await stateOf(handle.id);
      expect(done).toMatchObject({ status: 'succeeded', attempt: 1 });
      // startedAt is the run's first start, before the wait; its duration covers the wait.
      expect(done.startedAt!).toBeLessThan(wakeAt);
      expect(done.finishedAt!).toBeGreaterThanOrEqual(wakeAt);
      expect((await engine.client.getRunSteps(handle.id)).map((s) => [s.name, s.status, s.attempt])).toEqual([
        ['before', 'succeeded', 1],
        ['nap', 'succeeded', 1],
        ['after', 'succeeded', 1],
      ]);
    });

    // A wait uses no attempt, so the stored attempt must stay that of the attempt that reached the
    // wait (1), as it does for a run scheduled for a retry. Today finish.lua (outcome 'wait') sets it
    // back to 0 for the whole wait, and only the next claim brings it back to 1.
    it('keeps the stored attempt at 1 while the run waits for a timer or a child', async () => {
      const release = deferred();
      const childStarted = deferred();
      const held = engine.registry.define('held', {}, async ({ step }) => {
        await step.run('work', async () => {
          childStarted.resolve();
          await release.promise;
        });
        return 'child done';
      });
      const wf = engine.registry.define('waits-twice', {}, async ({ step }) => {
        await step.run('first', () => 1);
        await step.sleep('nap', 300);
        return step.runWorkflow('sub', held, {});
      });
      await engine.worker({ concurrency: 2 });
      const handle = await engine.client.start(wf, {});
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
      expect(await engine.client.getRunSteps(handle.id)).toEqual([
        expect.objectContaining({ name: 'first', status: 'succeeded', attempt: 1 }),
        expect.objectContaining({ name: 'nap', status: 'waiting', attempt: 1 }),
      ]);
      const waitingForTimer = await stateOf(handle.id);
      await childStarted.promise;
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
      const waitingForChild = await stateOf(handle.id);
      release.resolve();
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe('child done');
      expect(await stateOf(handle.id)).toMatchObject({ status: 'succeeded', attempt: 1 });
      expect(waitingForTimer).toMatchObject({ status: 'scheduled', attempt: 1 });
      expect(waitingForChild).toMatchObject({ status: 'scheduled', attempt: 1 });
    });

    it('waits for a duration string ("300ms") counted from when the step is first reached', async () => {
      const reached: number[] = [];
      const wf = engine.registry.define('nap-string', {}, async ({ step }) => {
        reached.push(Date.now());
        await step.sleep({ name: 'nap' }, '300ms');
        return Date.now();
      });
      await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(wf, {});
      const resumedAt = await handle.result({ timeoutMs: 5000 });
      expect(reached).toHaveLength(2);
      const [nap] = await engine.client.getRunSteps(handle.id);
      expect(nap).toEqual({
        name: 'nap',
        status: 'succeeded',
        seq: 1,
        attempt: 1,
        wakeAt: expect.any(Number),
        startedAt: expect.any(Number),
        finishedAt: nap.wakeAt,
      });
      // It lasted from when it began to its wake time.
      expect(nap.finishedAt! - nap.startedAt!).toBeGreaterThanOrEqual(300);
      // wakeAt = (time of the first reach) + 300, and the replay did not move it.
      expect(nap.wakeAt! - reached[0]).toBeGreaterThanOrEqual(300);
      expect(nap.wakeAt! - reached[0]).toBeLessThan(350);
      expect(reached[1]).toBeGreaterThanOrEqual(nap.wakeAt!);
      expect(resumedAt).toBeGreaterThanOrEqual(nap.wakeAt!);
      expect((await stateOf(handle.id)).attempt).toBe(1);
    });

    it('waits until a Date, and does not suspend for a Date already past', async () => {
      const executions: number[] = [];
      const wf = engine.registry.define('nap-date', {}, async ({ step, input }: WorkflowContext<{ until: number }>) => {
        executions.push(Date.now());
        await step.sleep('past', new Date(input.until - 60_000));
        await step.sleep('until', new Date(input.until));
        return Date.now();
      });
      await engine.worker({ concurrency: 1 });
      const until = Date.now() + 300;
      const handle = await engine.client.start(wf, { until });
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
      expect(await stateOf(handle.id)).toMatchObject({ availableAt: until });
      const resumedAt = await handle.result({ timeoutMs: 5000 });
      expect(resumedAt).toBeGreaterThanOrEqual(until);
      // One suspension only (for "until"): the handler ran twice, not three times.
      expect(executions).toHaveLength(2);
      expect(executions[1]).toBeGreaterThanOrEqual(until);
      const [past, later] = await engine.client.getRunSteps(handle.id);
      expect([past, later]).toEqual([
        { name: 'past', status: 'succeeded', seq: 1, attempt: 1, wakeAt: until - 60_000, startedAt: expect.any(Number), finishedAt: expect.any(Number) },
        { name: 'until', status: 'succeeded', seq: 2, attempt: 1, wakeAt: until, startedAt: expect.any(Number), finishedAt: until },
      ]);
      // A Date already past ended as it began.
      expect(past.finishedAt).toBe(past.startedAt);
    });

    it('survives every worker stopping: a new worker resumes the run after the wake time', async () => {
      let beforeRuns = 0;
      let resumedAt = 0;
      const wf = engine.registry.define('nap-restart', {}, async ({ step }) => {
        await step.run('before', () => ++beforeRuns);
        await step.sleep('nap', 600);
        resumedAt = Date.now();
        return 'woke up';
      });
      const w1 = await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(wf, {});
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
      const wakeAt = (await engine.client.getRunSteps(handle.id)).find((s) => s.name === 'nap')!.wakeAt!;
      await w1.stop();
      expect(Date.now()).toBeLessThan(wakeAt); // every worker was gone before the run was due
      expect(await stateOf(handle.id)).toMatchObject({ status: 'scheduled', availableAt: wakeAt });

      await engine.worker({ concurrency: 1 });
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe('woke up');
      expect(beforeRuns).toBe(1);
      expect(resumedAt).toBeGreaterThanOrEqual(wakeAt);
      expect(await stateOf(handle.id)).toMatchObject({ status: 'succeeded', attempt: 1 });
    });
  });

  describe('step.runWorkflow', () => {
    it('starts a child on another queue and returns its output; the waiting parent holds no slot', async () => {
      const release = deferred();
      const childStarted = deferred();
      let childRuns = 0;
      const child = engine.registry.define('double', { queue: 'children' }, async ({ step, input }: WorkflowContext<{ n: number }>) => {
        childRuns++;
        await step.run('work', async () => {
          childStarted.resolve();
          await release.promise;
        });
        return { doubled: input.n * 2 };
      });
      const parent = engine.registry.define('caller', {}, async ({ step }) => {
        const out = await step.runWorkflow('invoke', child, { n: 21 });
        return { got: out };
      });
      const worker = await engine.worker({ concurrency: 1 });
      expect([...worker.queues].sort()).toEqual(['children', 'default']);

      const handle = await engine.client.start(parent, {});
      const childId = `${handle.id}.invoke`;
      await childStarted.promise;
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
      // The single slot runs the child: the parent released it.
      expect(worker.activeRunIds).toEqual([childId]);
      expect(await parentField(childId)).toBe(handle.id);
      expect(await stateOf(childId)).toMatchObject({ workflow: 'double', queue: 'children', status: 'running', input: { n: 21 }, attempt: 1 });
      expect(await engine.client.getRunSteps(handle.id)).toEqual([
        { name: 'invoke', status: 'waiting', seq: 1, attempt: 1, childRunId: childId, startedAt: expect.any(Number) },
      ]);

      release.resolve();
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toEqual({ got: { doubled: 42 } });
      expect(childRuns).toBe(1);
      expect(await stateOf(childId)).toMatchObject({ status: 'succeeded', output: { doubled: 42 } });
      expect(await stateOf(handle.id)).toMatchObject({ status: 'succeeded', attempt: 1 });
      expect(await engine.client.getRunSteps(handle.id)).toEqual([
        expect.objectContaining({ name: 'invoke', status: 'succeeded', seq: 1, attempt: 1, output: { doubled: 42 } }),
      ]);
    });

    it('does not start a second child when the parent is retried after the child finished', async () => {
      let childRuns = 0;
      const child = engine.registry.define('greeter', {}, ({ input }: { input: { name: string } }) => {
        childRuns++;
        return `hello ${input.name}`;
      });
      const attempts: number[] = [];
      const parent = engine.registry.define('flaky-parent', { retries: { maxAttempts: 2, delay: 10 } }, async ({ step, run }) => {
        const greeting = await step.runWorkflow('greet', child, { name: 'ada' });
        attempts.push(run.attempt);
        if (run.attempt === 1) throw new Error('failed after the child');
        return greeting;
      });
      await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(parent, {});
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe('hello ada');
      expect(attempts).toEqual([1, 2]);
      expect(childRuns).toBe(1);
      expect((await engine.client.listRuns({ workflow: 'greeter' })).map((r) => [r.id, r.status])).toEqual([[`${handle.id}.greet`, 'succeeded']]);
      // The first attempt's error is not the succeeded run's (run-truth.spec.ts).
      expect(await stateOf(handle.id)).toMatchObject({ status: 'succeeded', attempt: 2 });
      expect((await stateOf(handle.id))!.error).toBeUndefined();
    });

    it("fails the parent's step with the child's error when the child fails", async () => {
      const child = engine.registry.define('refuser', { maxAttempts: 3 }, () => {
        throw new NonRetriableError('nope');
      });
      const parent = engine.registry.define('asker', { maxAttempts: 3 }, ({ step }) => step.runWorkflow('ask', child, {}));
      await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(parent, {});
      const error = await handle.result({ timeoutMs: 5000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(NonRetriableError);
      expect((error as Error).message).toBe('nope');
      expect(await stateOf(`${handle.id}.ask`)).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'NonRetriableError', message: 'nope' } });
      // NonRetriableError passes through: the parent fails at once too.
      expect(await stateOf(handle.id)).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'NonRetriableError', message: 'nope' } });
      expect(await engine.client.getRunSteps(handle.id)).toEqual([
        expect.objectContaining({ name: 'ask', status: 'failed', error: expect.objectContaining({ name: 'NonRetriableError', message: 'nope' }) }),
      ]);
      expect(await engine.client.listRuns({ workflow: 'refuser' })).toHaveLength(1);
    });

    it('fails the parent with TimeoutError when the child outlives timeoutMs; the child still ends', async () => {
      const release = deferred();
      const childStarted = deferred();
      const slow = engine.registry.define('slow-child', {}, async ({ step }) => {
        await step.run('work', async () => {
          childStarted.resolve();
          await release.promise;
        });
        return 'late';
      });
      const parent = engine.registry.define('impatient', { maxAttempts: 1 }, ({ step }) => step.runWorkflow({ name: 'call', timeoutMs: 300 }, slow, {}));
      await engine.worker({ concurrency: 2 });
      const t0 = Date.now();
      const handle = await engine.client.start(parent, {});
      const childId = `${handle.id}.call`;
      const error = await handle.result({ timeoutMs: 5000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TimeoutError);
      expect((error as Error).message).toBe(`Waiting for child run "${childId}" of step "call" timed out after 300 ms. Raise its timeout if it needs longer.`);
      expect(Date.now() - t0).toBeGreaterThanOrEqual(300);
      await childStarted.promise;
      expect(await statusOf(childId)).toBe('running');
      expect(await stateOf(handle.id)).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'TimeoutError' } });

      release.resolve();
      await expect(engine.client.handle(childId).result({ timeoutMs: 5000 })).resolves.toBe('late');
      // The late child result does not reach the failed parent.
      expect(await stateOf(handle.id)).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'TimeoutError' } });
      expect(await engine.client.getRunSteps(handle.id)).toEqual([
        expect.objectContaining({ name: 'call', status: 'failed', error: expect.objectContaining({ name: 'TimeoutError' }) }),
      ]);
    });

    it('cancels the unfinished child and grandchild when the waiting parent is canceled', async () => {
      const grandStarted = deferred();
      let grandSignal: AbortSignal | undefined;
      const grandchild = engine.registry.define('leaf', {}, async ({ step }) => {
        await step.run('hang', ({ signal }) => {
          grandSignal = signal;
          grandStarted.resolve();
          return new Promise(() => undefined);
        });
      });
      const child = engine.registry.define('middle', {}, ({ step }) => step.runWorkflow('grand', grandchild, {}));
      const parent = engine.registry.define('top', {}, ({ step }) => step.runWorkflow('child', child, {}));
      const worker = await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(parent, {});
      const childId = `${handle.id}.child`;
      const grandId = `${childId}.grand`;
      await grandStarted.promise;
      await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
      expect(await statusOf(grandId)).toBe('running');
      expect(await parentField(grandId)).toBe(childId);

      expect(await engine.client.cancelRun(handle.id, { reason: 'user gave up' })).toBe(true);
      await expect(handle.result({ timeoutMs: 2000 })).rejects.toThrow(CanceledError);
      expect(await stateOf(handle.id)).toMatchObject({ status: 'canceled', cancelReason: 'user gave up' });
      expect(await stateOf(childId)).toMatchObject({
        status: 'canceled',
        cancelReason: 'parent canceled',
        error: { name: 'CanceledError', message: `Run "${childId}" was canceled because its parent run "${handle.id}" was canceled.` },
      });
      expect(await stateOf(grandId)).toMatchObject({
        status: 'canceled',
        cancelReason: 'parent canceled',
        error: { name: 'CanceledError', message: `Run "${grandId}" was canceled because its parent run "${childId}" was canceled.` },
      });
      await expect(engine.client.handle(grandId).result({ timeoutMs: 1000 })).rejects.toThrow(CanceledError);
      // The running grandchild is stopped in its worker.
      await eventually(() => grandSignal?.aborted === true && worker.activeRunIds.length === 0);
      expect((await engine.client.listRuns({ status: 'canceled' })).map((r) => r.id).sort()).toEqual([handle.id, childId, grandId].sort());
    });

    it('gives two parents with the same idempotencyKey the same child run', async () => {
      const release = deferred();
      let childRuns = 0;
      const shared = engine.registry.define('report', {}, async ({ step, input }: WorkflowContext<{ month: string }>) => {
        childRuns++;
        await step.run('build', () => release.promise);
        return `report ${input.month}`;
      });
      const requester = engine.registry.define('requester', { maxConcurrency: Infinity }, ({ step }) =>
        step.runWorkflow({ name: 'get-report', idempotencyKey: 'report-2024-05' }, shared, { month: '2024-05' }),
      );
      await engine.worker({ concurrency: 4 });
      const a = await engine.client.start(requester, {});
      await eventually(async () => (await statusOf(a.id)) === 'scheduled');
      const b = await engine.client.start(requester, {});
      await eventually(async () => (await statusOf(b.id)) === 'scheduled');
      const childId = `${a.id}.get-report`;
      expect(await engine.client.getRunSteps(a.id)).toEqual([
        { name: 'get-report', status: 'waiting', seq: 1, attempt: 1, childRunId: childId, startedAt: expect.any(Number) },
      ]);
      expect(await engine.client.getRunSteps(b.id)).toEqual([
        { name: 'get-report', status: 'waiting', seq: 1, attempt: 1, childRunId: childId, startedAt: expect.any(Number) },
      ]);

      release.resolve();
      await expect(a.result({ timeoutMs: 5000 })).resolves.toBe('report 2024-05');
      await expect(b.result({ timeoutMs: 5000 })).resolves.toBe('report 2024-05');
      expect(childRuns).toBe(1);
      expect((await engine.client.listRuns({ workflow: 'report' })).map((r) => r.id)).toEqual([childId]);
      expect(await stateOf(childId)).toMatchObject({ status: 'succeeded', idempotencyKey: 'report-2024-05' });
      expect(await parentField(childId)).toBe(a.id);
      for (const h of [a, b]) {
        expect(await engine.client.getRunSteps(h.id)).toEqual([expect.objectContaining({ name: 'get-report', status: 'succeeded', output: 'report 2024-05' })]);
      }
    });
    it('gives a parent whose idempotencyKey names a child that already ended compensation_failed that failure at once', async () => {
      const shared = engine.registry.define('refundable', {}, async ({ step }) => {
        await step.run(
          {
            name: 'charge',
            compensateRetries: { maxAttempts: 1 },
            compensate: () => {
              throw new Error('the refund API is down');
            },
          },
          () => 'charged',
        );
        throw new NonRetriableError('out of stock');
      });
      const requester = engine.registry.define('requester', { maxAttempts: 1 }, ({ step }) =>
        step.runWorkflow({ name: 'order', idempotencyKey: 'order-7' }, shared, { sku: 'a' }),
      );
      await engine.worker({ concurrency: 4 });
      const first = await engine.client.start(shared, { sku: 'a' }, { idempotencyKey: 'order-7' });
      await expect(engine.client.waitForRun(first.id, { throwOnFailure: false })).resolves.toMatchObject({ status: 'compensation_failed' });

      const handle = await engine.client.start(requester, {});
      await expect(handle.result({ timeoutMs: 5000 })).rejects.toThrow('out of stock');
      expect(await engine.client.getRunSteps(handle.id)).toEqual([
        expect.objectContaining({ name: 'order', status: 'failed', error: expect.objectContaining({ name: 'NonRetriableError', message: 'out of stock' }) }),
      ]);
      // The parent reached the existing child, started no other, and left it for a person.
      expect((await engine.client.listRuns({ workflow: 'refundable' })).map((r) => [r.id, r.status])).toEqual([[first.id, 'compensation_failed']]);
    });
  });

  describe('parallel child runs', () => {
    it('starts children of a Promise.all together, and enforces the earliest timeout among them', async () => {
      const release = deferred();
      let started = 0;
      const slow = engine.registry.define('slow-child', { queue: 'children', maxConcurrency: Infinity }, async () => {
        started++;
        await release.promise;
        return 'late';
      });
      const parent = engine.registry.define('fan-parent', {}, async ({ step }) => {
        return Promise.all([step.runWorkflow('a', slow, {}), step.runWorkflow({ name: 'b', timeoutMs: 300 }, slow, {})]);
      });
      await engine.worker({ queues: ['default', 'children'], concurrency: 4 });
      const handle = await engine.client.start(parent, {});
      const t0 = Date.now();
      const error = await handle.result({ timeoutMs: 5000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(TimeoutError);
      expect(Date.now() - t0).toBeLessThan(3000); // not held until child "a" ends (it never does here)
      expect(started).toBe(2);
      release.resolve();
    });

    it('resumes when every child has ended, whichever ends first', async () => {
      const gates = { a: deferred(), b: deferred() };
      const child = engine.registry.define(
        'gated-child',
        { queue: 'children', maxConcurrency: Infinity },
        async ({ input }: WorkflowContext<{ gate: 'a' | 'b' }>) => {
          await gates[input.gate].promise;
          return input.gate;
        },
      );
      const parent = engine.registry.define('join-parent', {}, async ({ step }) =>
        Promise.all([step.runWorkflow('a', child, { gate: 'a' }), step.runWorkflow('b', child, { gate: 'b' })]),
      );
      await engine.worker({ queues: ['default', 'children'], concurrency: 4 });
      const handle = await engine.client.start(parent, {});
      await eventually(async () => (await handle.getState())?.status === 'scheduled');
      gates.b.resolve();
      await eventually(async () => (await engine.client.getRunSteps(handle.id)).some((s) => s.name === 'b' && s.status === 'succeeded'));
      gates.a.resolve();
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toEqual(['a', 'b']);
    });
  });

  describe('step.emitWorkflow', () => {
    it('returns the child id without waiting, and the same id without a second child after a parent retry', async () => {
      const release = deferred();
      const childStarted = deferred();
      let childRuns = 0;
      const background = engine.registry.define('background', {}, async ({ step, input }: WorkflowContext<{ job: number }>) => {
        childRuns++;
        await step.run('work', async () => {
          childStarted.resolve();
          await release.promise;
        });
        return `done ${input.job}`;
      });
      const ids: string[] = [];
      const parent = engine.registry.define('fire-and-forget', { retries: { maxAttempts: 2, delay: 10 } }, async ({ step, run }) => {
        const id = await step.emitWorkflow('kick', background, { job: 7 });
        ids.push(id);
        if (run.attempt === 1) throw new Error('failed after the emit');
        return id;
      });
      await engine.worker({ concurrency: 2 });
      const handle = await engine.client.start(parent, {});
      const childId = `${handle.id}.kick`;
      await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe(childId);
      expect(ids).toEqual([childId, childId]);
      expect(await stateOf(handle.id)).toMatchObject({ status: 'succeeded', attempt: 2 });
      // The parent ended while the child is still blocked.
      await childStarted.promise;
      expect(await statusOf(childId)).toBe('running');
      expect(await parentField(childId)).toBe(handle.id);
      expect((await engine.client.listRuns({ workflow: 'background' })).map((r) => r.id)).toEqual([childId]);
      expect(await engine.client.getRunSteps(handle.id)).toEqual([
        expect.objectContaining({ name: 'kick', status: 'succeeded', seq: 1, attempt: 1, output: childId }),
      ]);

      release.resolve();
      await expect(engine.client.handle(childId).result({ timeoutMs: 5000 })).resolves.toBe('done 7');
      expect(childRuns).toBe(1);
    });
  });
});
