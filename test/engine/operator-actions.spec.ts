import { ConfigurationError, NonRetriableError, RunNotEndedError, RunNotFoundError, RunTerminatedError, type WorkflowContext } from '../../lib';
import { scanPrefix } from '../../lib/core/store/prefix-scan';
import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * Operator actions: `client.terminate(runId, { reason })` ends a run at once as `terminated`
 * (no cooperative cancel, no compensation, no onFailure), and `client.deleteRun(runId, { force })`
 * deletes a run with everything it owns.
 */
describe('terminate and deleteRun', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;

  /** What a key holds that could name a run: members, hash fields, or a string's value. */
  async function membersOf(key: string): Promise<string[]> {
    const { redis } = engine;
    const type = await redis.type(key);
    if (type === 'zset') return redis.zrange(key, '0', '-1');
    if (type === 'set') return redis.smembers(key);
    if (type === 'list') return redis.lrange(key, 0, -1);
    if (type === 'hash') return redis.hkeys(key);
    if (type === 'string') return [(await redis.get(key)) ?? ''];
    return [];
  }

  /** Every key of the prefix whose name or members (zset, set, list, hash fields) name `runId`. */
  async function traces(runId: string): Promise<string[]> {
    const { redis } = engine;
    const found: string[] = [];
    await scanPrefix(redis, engine.client.keys, '*', async (keys) => {
      for (const key of keys) {
        if (key.includes(runId)) {
          found.push(key);
          continue;
        }
        const members = await membersOf(key);
        if (members.some((m) => m === runId || m.startsWith(`${runId}|`))) found.push(`${key} (member)`);
      }
    });
    return found.sort();
  }

  describe('terminate', () => {
    it('ends a running run at once: its step signal aborts with RunTerminatedError, and no compensation, onFailure or later step runs', async () => {
      const inStep = deferred();
      const aborted = deferred<unknown>();
      const ran: string[] = [];
      const charge = engine.registry.define('charge', { onFailure: () => void ran.push('onFailure') }, async ({ step }: WorkflowContext) => {
        try {
          // A completed step with a compensation: a terminated run never runs it.
          await step.run({ name: 'prepare', compensate: () => void ran.push('undo prepare') }, () => 'prepared');
          await step.run('reserve', ({ signal }) => {
            signal.addEventListener('abort', () => aborted.resolve(signal.reason));
            inStep.resolve();
            return new Promise<never>(() => undefined);
          });
          await step.run('capture', () => void ran.push('capture'));
        } catch (error) {
          // A saga's compensation: never reached for a terminated run.
          await step.run('release', () => void ran.push('release'));
          throw error;
        }
      });
      const other = engine.registry.define('other', {}, () => 'other done');
      await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(charge, {});
      await inStep.promise;

      expect(await engine.client.terminate(handle.id, { reason: 'stuck on the gateway' })).toBe(true);
      // Ended at once, by the call itself.
      expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'terminated', cancelReason: 'stuck on the gateway' });
      const reason = await aborted.promise;
      expect([reason instanceof RunTerminatedError, (reason as Error).message]).toEqual([true, `Run "${handle.id}" was terminated.`]);
      expect((reason as Error).message).toBe(`Run "${handle.id}" was terminated.`);

      const error = await handle.result({ timeoutMs: 2_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RunTerminatedError);
      expect(error).toMatchObject({ runId: handle.id, reason: 'stuck on the gateway', message: `Run "${handle.id}" was terminated: stuck on the gateway.` });
      await expect(engine.client.waitForRun(handle.id, { throwOnFailure: false })).resolves.toMatchObject({
        runId: handle.id,
        status: 'terminated',
        error: expect.any(RunTerminatedError),
      });

      // The only worker slot is free again; by the time another run went through, the attempt is over.
      await expect((await engine.client.start(other, {})).result({ timeoutMs: 5_000 })).resolves.toBe('other done');
      expect(ran).toEqual([]);
      expect((await engine.client.getRunSteps(handle.id)).map((s) => s.name)).toEqual(['prepare']);
      expect(await statusOf(handle.id)).toBe('terminated');
      expect(await engine.redis.zscore(engine.client.keys.leases(), handle.id)).toBeNull();
      expect(await engine.client.countRuns({ status: 'terminated' })).toBe(1);
      expect((await engine.client.listRuns({ status: 'terminated' })).map((r) => r.id)).toEqual([handle.id]);
      expect((await engine.client.listRuns({ workflow: 'charge', status: 'terminated' })).map((r) => r.id)).toEqual([handle.id]);
    });

    it('ends a waiting run and a queued run, which then never run', async () => {
      let resumed = 0;
      let started = 0;
      const approval = engine.registry.define('approval', {}, async ({ step }) => {
        await step.waitForSignal('approve', 'approve');
        resumed++;
      });
      const queuedWf = engine.registry.define('later', {}, () => void started++);
      const marker = engine.registry.define('marker', {}, () => 'marker');

      // A queued run, with no worker yet.
      const queued = await engine.client.start(queuedWf, {});
      expect(await statusOf(queued.id)).toBe('queued');
      expect(await engine.client.terminate(queued.id)).toBe(true);
      expect(await statusOf(queued.id)).toBe('terminated');

      // A run waiting for a signal.
      await engine.worker({ concurrency: 1 });
      const waiting = await engine.client.start(approval, {});
      await eventually(async () => (await statusOf(waiting.id)) === 'scheduled');
      expect(await engine.client.terminate(waiting.id, { reason: 'no longer needed' })).toBe(true);
      expect(await statusOf(waiting.id)).toBe('terminated');
      expect(await engine.client.signal(waiting.id, 'approve', {})).toBe(false);

      // Runs started after them go through; the terminated ones never ran.
      await expect((await engine.client.start(marker, {})).result({ timeoutMs: 5_000 })).resolves.toBe('marker');
      expect(started).toBe(0);
      expect(resumed).toBe(0);
      await expect(queued.result({ timeoutMs: 1_000 })).rejects.toThrow(new RunTerminatedError(queued.id));
      expect(await engine.client.countRuns({ status: 'terminated' })).toBe(2);
    });

    it('answers false for a run that already ended, leaving it as it was, and RunNotFoundError for an unknown run', async () => {
      const quick = engine.registry.define('quick', {}, () => 'done');
      await engine.worker();
      const handle = await engine.client.start(quick, {});
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('done');
      const before = await engine.redis.hgetall(engine.client.keys.run(handle.id));

      expect(await engine.client.terminate(handle.id)).toBe(false);
      expect(await engine.redis.hgetall(engine.client.keys.run(handle.id))).toEqual(before);
      await expect(engine.client.terminate('no-such-run')).rejects.toThrow(new RunNotFoundError('no-such-run'));
      await expect(engine.client.terminate('no-such-run')).rejects.toBeInstanceOf(RunNotFoundError);
    });

    it('rejects bad options with ConfigurationError naming the option, before reaching Redis', async () => {
      const bad = <T>(value: unknown) => value as T;
      await expect(engine.client.terminate('r', bad({ reasn: 'stuck' }))).rejects.toThrow(
        new ConfigurationError('Unknown option "reasn" in terminate options. Did you mean "reason"? Known options: reason.'),
      );
      await expect(engine.client.terminate('r', { reason: '' })).rejects.toThrow(ConfigurationError);
      await expect(engine.client.terminate('r', { reason: '' })).rejects.toThrow('terminate reason must be a non-empty string');
      await expect(engine.client.deleteRun('r', bad({ froce: true }))).rejects.toThrow('Unknown option "froce" in deleteRun options');
      await expect(engine.client.deleteRun('r', { force: bad('yes') })).rejects.toThrow(
        new ConfigurationError('deleteRun option "force" must be a boolean, got "yes".'),
      );
    });

    it('ends a compensating run at once: the signal of the running compensation aborts and the compensations left never run', async () => {
      const inCompensation = deferred();
      const aborted = deferred<unknown>();
      const compensated: string[] = [];
      const checkout = engine.registry.define('checkout', {}, async ({ step }) => {
        await step.run({ name: 'charge', compensate: () => void compensated.push('charge') }, () => 'charged');
        await step.run(
          {
            name: 'reserve',
            compensate: (_output, ctx) =>
              new Promise<never>((_, reject) => {
                ctx.signal.addEventListener('abort', () => {
                  aborted.resolve(ctx.signal.reason);
                  reject(ctx.signal.reason);
                });
                inCompensation.resolve();
              }),
          },
          () => 'reserved',
        );
        await step.run('ship', () => {
          throw new NonRetriableError('the carrier is down');
        });
      });
      const other = engine.registry.define('other', {}, () => 'other done');
      await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(checkout, {});
      await inCompensation.promise;
      expect(await statusOf(handle.id)).toBe('compensating');
      // A compensating run is not canceled again, but it is terminated.
      expect(await engine.client.cancelRun(handle.id)).toBe(false);
      expect(await engine.client.terminate(handle.id)).toBe(true);
      expect(await statusOf(handle.id)).toBe('terminated');
      expect(await aborted.promise).toBeInstanceOf(RunTerminatedError);
      await expect(handle.result({ timeoutMs: 2_000 })).rejects.toBeInstanceOf(RunTerminatedError);

      await expect((await engine.client.start(other, {})).result({ timeoutMs: 5_000 })).resolves.toBe('other done');
      expect(compensated).toEqual([]);
      expect(await statusOf(handle.id)).toBe('terminated');
      expect(await engine.redis.zscore(engine.client.keys.compensationLeases(), handle.id)).toBeNull();
      expect(await engine.client.countRuns({ status: 'compensating' })).toBe(0);
    });

    it('terminates the unfinished children a run waits on, and a parent waiting on a terminated child gets a failed step', async () => {
      const inChild = deferred();
      const child = engine.registry.define('child', {}, async ({ step }) => {
        await step.run('work', () => {
          inChild.resolve();
          return new Promise<never>(() => undefined);
        });
      });
      const parent = engine.registry.define('parent', {}, async ({ step }) => {
        try {
          return await step.runWorkflow('child', child, {});
        } catch (error) {
          return { childFailed: (error as Error).name, message: (error as Error).message };
        }
      });
      await engine.worker({ concurrency: 4 });

      // Terminating the parent terminates the child it waits on.
      const p1 = await engine.client.start(parent, {});
      await inChild.promise;
      const childId = `${p1.id}.child`;
      expect(await statusOf(childId)).toBe('running');
      expect(await engine.client.terminate(p1.id)).toBe(true);
      expect(await statusOf(p1.id)).toBe('terminated');
      expect(await engine.client.getRun(childId)).toMatchObject({ status: 'terminated', cancelReason: 'parent terminated' });
      const childError = await engine.client
        .handle(childId)
        .result({ timeoutMs: 1_000 })
        .catch((e: unknown) => e);
      expect(childError).toBeInstanceOf(RunTerminatedError);
      expect((childError as Error).message).toBe(`Run "${childId}" was terminated: its parent run "${p1.id}" was terminated.`);

      // Terminating a child fails its parent's step with RunTerminatedError; the parent goes on.
      const p2 = await engine.client.start(parent, {});
      const child2 = `${p2.id}.child`;
      await eventually(async () => (await statusOf(child2)) === 'running' && (await statusOf(p2.id)) === 'scheduled');
      expect(await engine.client.terminate(child2, { reason: 'operator' })).toBe(true);
      await expect(p2.result({ timeoutMs: 5_000 })).resolves.toEqual({
        childFailed: 'RunTerminatedError',
        message: `Run "${child2}" was terminated: operator.`,
      });
    });
  });

  describe('deleteRun', () => {
    it('deletes an ended run and every key and index entry of it', async () => {
      const payments = engine.registry.define('payments', {}, async ({ step }) => {
        await step.run('one', () => 1);
        await step.run('two', () => 2);
        return 'paid';
      });
      await engine.worker();
      const kept = await engine.client.start(payments, {}, { idempotencyKey: 'order-1' });
      const handle = await engine.client.start(payments, {}, { idempotencyKey: 'order-2' });
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('paid');
      await expect(kept.result({ timeoutMs: 5_000 })).resolves.toBe('paid');
      const before = await traces(handle.id);
      const { keys } = engine.client;
      expect(before).toEqual(
        expect.arrayContaining([
          keys.run(handle.id),
          `${keys.idempotency('payments', 'order-2')} (member)`,
          `${keys.status('succeeded')} (member)`,
          `${keys.workflowStatusRuns('succeeded', 'payments')} (member)`,
        ]),
      );

      expect(await engine.client.deleteRun(handle.id)).toBe(true);
      expect(await traces(handle.id)).toEqual([]);
      expect(await engine.client.getRun(handle.id)).toBeNull();
      // The other run is untouched, and a second delete finds nothing.
      expect(await statusOf(kept.id)).toBe('succeeded');
      expect((await traces(kept.id)).length).toBeGreaterThan(0);
      expect(await engine.client.countRuns()).toBe(1);
      expect(await engine.client.deleteRun(handle.id)).toBe(false);
      // Its idempotency key is free again: the same key starts a new run.
      expect((await engine.client.start(payments, {}, { idempotencyKey: 'order-2' })).id).not.toBe(handle.id);
    });

    it('refuses a live run without force and changes nothing; with force terminates it and deletes it in one call', async () => {
      const inStep = deferred();
      const aborted = deferred<unknown>();
      const slow = engine.registry.define('slow', {}, async ({ step }) => {
        await step.run('first', () => 1);
        await step.run('hang', ({ signal }) => {
          signal.addEventListener('abort', () => aborted.resolve(signal.reason));
          inStep.resolve();
          return new Promise<never>(() => undefined);
        });
      });
      const marker = engine.registry.define('marker', {}, () => 'marker');
      await engine.worker({ concurrency: 1 });
      const handle = await engine.client.start(slow, {});
      await inStep.promise;
      const runKey = engine.client.keys.run(handle.id);
      const before = await engine.redis.hgetall(runKey);
      const tracesBefore = await traces(handle.id);

      const refused = await engine.client.deleteRun(handle.id).catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(RunNotEndedError);
      expect(refused).toMatchObject({
        runId: handle.id,
        status: 'running',
        message: `Run "${handle.id}" is running: only an ended run can be deleted. End it first (cancelRun or terminate), or pass { force: true } to terminate and delete it in one step.`,
      });
      expect(await engine.redis.hgetall(runKey)).toEqual(before);
      expect(await traces(handle.id)).toEqual(tracesBefore);

      expect(await engine.client.deleteRun(handle.id, { force: true })).toBe(true);
      expect(await traces(handle.id)).toEqual([]);
      expect(await aborted.promise).toBeInstanceOf(RunTerminatedError);
      // The worker's slot is free, and the deleted run stays deleted once its attempt stops.
      await expect((await engine.client.start(marker, {})).result({ timeoutMs: 5_000 })).resolves.toBe('marker');
      expect(await engine.redis.exists(runKey)).toBe(0);
      expect(await engine.client.countRuns({ workflow: 'slow' })).toBe(0);
    });

    it('force-deletes a queued run, whose id the next claim drops', async () => {
      let ran = 0;
      const later = engine.registry.define('later', {}, () => void ran++);
      const marker = engine.registry.define('marker', {}, () => 'marker');
      const queued = await engine.client.start(later, {});
      await expect(engine.client.deleteRun(queued.id)).rejects.toThrow(new RunNotEndedError(queued.id, 'queued'));
      expect(await engine.client.deleteRun(queued.id, { force: true })).toBe(true);
      expect(await engine.client.getRun(queued.id)).toBeNull();
      await engine.worker({ concurrency: 1 });
      await expect((await engine.client.start(marker, {})).result({ timeoutMs: 5_000 })).resolves.toBe('marker');
      expect(ran).toBe(0);
      expect(await traces(queued.id)).toEqual([]);
    });
  });
});
