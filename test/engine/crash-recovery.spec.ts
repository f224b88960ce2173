import { join } from 'node:path';

import { defineCrashWorkflows, effectKey } from '../fixtures/crash-worker';
import { eventually, TestEngine } from '../support/engine';
import { killWorkerProcess, spawnWorkerProcess, whileAlive, type WorkerProcess } from '../support/worker-process';

const FIXTURE = join(__dirname, '..', 'fixtures', 'crash-worker.ts');
/** The child compiles the engine with SWC on start-up, so its first claim may take a few seconds. */
const CHILD_PATIENCE_MS = 15_000;

/**
 * A worker in another process (test/fixtures/crash-worker.ts) that runs a workflow up to a step
 * that hangs, is SIGKILLed there, and a worker in this process resumes the run after its lease
 * expires. Both processes are coordinated through Redis state only.
 */
describe('crash recovery', () => {
  let engine: TestEngine;
  let child: WorkerProcess | undefined;

  beforeEach(() => {
    engine = new TestEngine();
    child = undefined;
  });

  afterEach(async () => {
    try {
      await killWorkerProcess(child);
    } finally {
      await engine.close();
    }
  });

  function spawnCrashWorker(): WorkerProcess {
    child = spawnWorkerProcess(FIXTURE, { REDFLOW_CRASH_PREFIX: engine.prefix });
    return child;
  }

  /** Waits for `check` while the child is alive; fails at once, with its stderr, if it exited. */
  const whileChildRuns = (check: () => Promise<boolean>) => whileAlive(child ? [child] : [], 'The crash worker', check, CHILD_PATIENCE_MS);

  async function killChild(worker: WorkerProcess): Promise<void> {
    expect(worker.proc.kill('SIGKILL')).toBe(true);
    await expect(worker.exited).resolves.toEqual({ code: null, signal: 'SIGKILL' });
  }

  const effects = async (...steps: string[]) => (await engine.redis.mget(...steps.map((s) => effectKey(engine.prefix, s)))).map(Number);
  const stepNames = async (runId: string) => (await engine.client.getRunSteps(runId)).map((s) => s.name).sort();

  it('a worker killed during a compensation: after recovery each compensation completed exactly once, and none of an already-compensated step ran again', async () => {
    const { saga } = defineCrashWorkflows(engine.registry, engine.redis, engine.prefix, 'parent');
    const proc = spawnCrashWorker();
    const handle = await engine.client.start(saga, {});

    // The child compensated reserve and has started charge's compensation, which hangs there.
    await whileChildRuns(async () => (await effects('comp-started:charge'))[0] === 1);
    expect(await effects('comp-started:reserve', 'comp-done:reserve', 'comp-done:charge')).toEqual([1, 1, 0]);
    expect(await handle.getState()).toMatchObject({ status: 'compensating' });

    await killChild(proc);
    await engine.worker();

    await expect(engine.client.waitForRun(handle.id, { throwOnFailure: false, timeoutMs: 10_000 })).resolves.toMatchObject({ status: 'failed' });
    expect(await handle.getState()).toMatchObject({ status: 'failed', compensated: true, error: { message: 'the carrier refused the parcel' } });
    // reserve's compensation was stored before the kill: it never ran again. charge's started
    // twice (the kill came before it returned) and completed once, here.
    expect(await effects('comp-started:reserve', 'comp-done:reserve')).toEqual([1, 1]);
    expect(await effects('comp-started:charge', 'comp-done:charge')).toEqual([2, 1]);
    // The steps themselves ran once, in the child.
    expect(await effects('charge', 'reserve')).toEqual([1, 1]);
  });

  it('resumes a run after its worker is killed mid-step, without running completed steps again', async () => {
    const { sequential } = defineCrashWorkflows(engine.registry, engine.redis, engine.prefix, 'parent');
    const proc = spawnCrashWorker();
    const handle = await engine.client.start(sequential, {});

    // The child has started step three, which hangs; one and two are stored before three starts.
    await whileChildRuns(async () => (await effects('three'))[0] === 1 && (await stepNames(handle.id)).join() === 'one,two');
    expect(await effects('one', 'two', 'three')).toEqual([1, 1, 1]);
    expect(await handle.getState()).toMatchObject({ status: 'running', attempt: 1 });
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'lease')).toContain(`:${proc.proc.pid}:`);

    await killChild(proc);
    await engine.worker();

    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({
      one: { by: 'child', n: 1 },
      two: { by: 'child', n: 1 },
      three: { by: 'parent', n: 2 },
    });
    // one and two ran once (in the child); three started in the child and ran again here.
    expect(await effects('one', 'two', 'three')).toEqual([1, 1, 2]);
    // reap.lua gives the interrupted attempt back (attempt - 1), so the resumed attempt is 1 again.
    expect(await handle.getState()).toMatchObject({ status: 'succeeded', attempt: 1 });
    const steps = await engine.client.getRunSteps(handle.id);
    expect(steps.map((s) => [s.name, s.status, s.seq, s.attempt, s.output])).toEqual([
      ['one', 'succeeded', 1, 1, { by: 'child', n: 1 }],
      ['two', 'succeeded', 2, 1, { by: 'child', n: 1 }],
      ['three', 'succeeded', 3, 1, { by: 'parent', n: 2 }],
    ]);
    // Step three's output proves the run was claimed again here; the lease is released (its token emptied).
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'lease')).toBe('');
    expect(await engine.redis.zscore(engine.client.keys.leases(), handle.id)).toBeNull();
  });

  it('step.now(), step.uuid() and step.random() return the same values after the worker is killed, and the step that used them sees the same key', async () => {
    const { deterministic } = defineCrashWorkflows(engine.registry, engine.redis, engine.prefix, 'parent');
    const proc = spawnCrashWorker();
    const handle = await engine.client.start(deterministic, {});
    // The values are stored before "charge" starts; the child hangs in it.
    await whileChildRuns(async () => (await effects('charge'))[0] === 1);
    const [at, key, r] = (await engine.redis.hmget(engine.client.keys.run(handle.id), 'd:now', 'd:uuid', 'd:random')).map((v) => JSON.parse(v!));
    expect(typeof at).toBe('number');
    expect(key).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(r).toBeGreaterThanOrEqual(0);
    expect(r).toBeLessThan(1);

    await killChild(proc);
    await engine.worker();

    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ at, key, r, charge: { by: 'parent', n: 2, key } });
    // They are values, not steps.
    expect(await stepNames(handle.id)).toEqual(['charge']);
  });

  it('runs again only the parallel branch that was interrupted', async () => {
    const { parallel } = defineCrashWorkflows(engine.registry, engine.redis, engine.prefix, 'parent');
    const proc = spawnCrashWorker();
    const handle = await engine.client.start(parallel, {});

    // Branches a and b finished and are stored; c started and hangs.
    await whileChildRuns(async () => (await effects('c'))[0] === 1 && (await stepNames(handle.id)).join() === 'a,b');
    expect(await effects('a', 'b', 'c')).toEqual([1, 1, 1]);
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'lease')).toContain(`:${proc.proc.pid}:`);

    await killChild(proc);
    await engine.worker();

    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({
      a: { by: 'child', n: 1 },
      b: { by: 'child', n: 1 },
      c: { by: 'parent', n: 2 },
    });
    expect(await effects('a', 'b', 'c')).toEqual([1, 1, 2]);
    expect(await handle.getState()).toMatchObject({ status: 'succeeded', attempt: 1 });
    const steps = await engine.client.getRunSteps(handle.id);
    // a and b finished concurrently in the child (seq 1 and 2 in either order); c is stored last.
    expect(
      steps
        .slice(0, 2)
        .map((s) => [s.name, s.status, s.attempt, s.output])
        .sort(),
    ).toEqual([
      ['a', 'succeeded', 1, { by: 'child', n: 1 }],
      ['b', 'succeeded', 1, { by: 'child', n: 1 }],
    ]);
    expect(steps.map((s) => s.seq)).toEqual([1, 2, 3]);
    expect(steps[2]).toMatchObject({ name: 'c', status: 'succeeded', attempt: 1, output: { by: 'parent', n: 2 } });
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'lease')).toBe('');
    expect(await engine.redis.zscore(engine.client.keys.leases(), handle.id)).toBeNull();
  });

  it('delivers a signal sent while the worker that ran the wait is dead, once, after another worker takes the run', async () => {
    const { signaled } = defineCrashWorkflows(engine.registry, engine.redis, engine.prefix, 'parent');
    const proc = spawnCrashWorker();
    const handle = await engine.client.start(signaled, {});
    // The child ran "before" and recorded the wait: the run is suspended, holding no lease.
    await whileChildRuns(async () => (await handle.getState())?.status === 'scheduled');
    expect((await engine.client.getRunSteps(handle.id)).map((s) => [s.name, s.status])).toEqual([
      ['before', 'succeeded'],
      ['wait', 'waiting'],
    ]);
    await killChild(proc);

    expect(await engine.client.signal(handle.id, 'go', { ok: 1 })).toBe(true);
    // Delivered into the step record and queued again, with no worker alive.
    expect(await handle.getState()).toMatchObject({ status: 'queued' });
    expect(await engine.redis.llen(engine.client.keys.signals(handle.id))).toBe(0);
    await engine.worker();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ before: { by: 'child', n: 1 }, got: { ok: 1 }, after: { by: 'parent', n: 1 } });
    expect(await effects('before', 'after')).toEqual([1, 1]);
    // A second signal finds the run ended: nothing consumed it twice.
    expect(await engine.client.signal(handle.id, 'go', { ok: 2 })).toBe(false);
  });

  /** Starts a `crashy-held-*` workflow in the child and waits until the child recorded its wait and holds the lease. */
  async function recordWaitInChild(which: 'heldWait' | 'heldEventWait' = 'heldWait') {
    const workflows = defineCrashWorkflows(engine.registry, engine.redis, engine.prefix, 'parent');
    const proc = spawnCrashWorker();
    const handle = await engine.client.start(workflows[which], {});
    const steps = async () => (await engine.client.getRunSteps(handle.id)).map((s) => [s.name, s.status]);
    await whileChildRuns(
      async () =>
        JSON.stringify(await steps()) ===
        JSON.stringify([
          ['before', 'succeeded'],
          ['wait', 'waiting'],
        ]),
    );
    expect(await handle.getState()).toMatchObject({ status: 'running', attempt: 1 });
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'lease')).toContain(`:${proc.proc.pid}:`);
    const wakeAt = (await engine.client.getRunSteps(handle.id))[1].wakeAt!;
    expect(wakeAt - Date.now()).toBeGreaterThan(3_500_000); // the 1 h timeout
    return { proc, handle, steps, wakeAt };
  }

  it('a worker killed while it holds the lease just after recording a signal wait: the run waits again under another worker, and completes with the signal', async () => {
    const { proc, handle, steps, wakeAt } = await recordWaitInChild();
    await killChild(proc);
    await engine.worker();

    // The lease expires, the run is recovered and replayed here: it does not go past the wait,
    // which keeps its deadline, and "before" is not run again.
    await eventually(async () => (await handle.getState())?.status === 'scheduled', 10_000);
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'recoveries')).toBe('1');
    expect(await steps()).toEqual([
      ['before', 'succeeded'],
      ['wait', 'waiting'],
    ]);
    expect((await engine.client.getRunSteps(handle.id))[1].wakeAt).toBe(wakeAt);
    expect(await effects('before', 'after')).toEqual([1, 0]);

    expect(await engine.client.signal(handle.id, 'go', { ok: 1 })).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ before: { by: 'child', n: 1 }, got: { ok: 1 }, after: { by: 'parent', n: 1 } });
    expect(await effects('before', 'after')).toEqual([1, 1]);
    expect(await handle.getState()).toMatchObject({ status: 'succeeded', attempt: 1 });
    expect(await engine.client.signal(handle.id, 'go', { ok: 2 })).toBe(false);
  });

  it('a signal sent while the killed worker still holds the lease after recording the wait is delivered into the wait, once, after recovery', async () => {
    const { proc, handle } = await recordWaitInChild();
    await killChild(proc);

    // No worker is alive and the run is still running under the dead worker's lease: the signal goes
    // into the recorded wait (nothing is buffered) and the run is not queued by it.
    expect(await engine.client.signal(handle.id, 'go', { ok: 1 })).toBe(true);
    expect(await handle.getState()).toMatchObject({ status: 'running' });
    expect(await engine.redis.llen(engine.client.keys.signals(handle.id))).toBe(0);
    expect((await engine.client.getRunSteps(handle.id))[1]).toMatchObject({ name: 'wait', status: 'succeeded', output: { ok: 1 } });

    await engine.worker();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ before: { by: 'child', n: 1 }, got: { ok: 1 }, after: { by: 'parent', n: 1 } });
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'recoveries')).toBe('1');
    expect(await effects('before', 'after')).toEqual([1, 1]);
    expect(await engine.client.signal(handle.id, 'go', { ok: 2 })).toBe(false);
  });

  it('an event emitted while the killed worker still holds the lease after recording an event wait is delivered into the wait, once, after recovery', async () => {
    const { proc, handle } = await recordWaitInChild('heldEventWait');
    await killChild(proc);

    const shapes = engine.client.keys.eventShapes('shipped');
    expect(await engine.redis.hgetall(shapes)).toEqual({ order: '1' });
    await engine.client.emitEvent('shipped', { order: 'o-2' });
    expect((await engine.client.getRunSteps(handle.id))[1]).toMatchObject({ name: 'wait', status: 'waiting' });
    // The matching event goes into the recorded wait, which leaves the lookup; the run stays running.
    await engine.client.emitEvent('shipped', { order: 'o-1', carrier: 'dhl' });
    expect(await handle.getState()).toMatchObject({ status: 'running' });
    expect((await engine.client.getRunSteps(handle.id))[1]).toMatchObject({ name: 'wait', status: 'succeeded', output: { order: 'o-1', carrier: 'dhl' } });
    expect(await engine.redis.hlen(shapes)).toBe(0);

    await engine.worker();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({
      before: { by: 'child', n: 1 },
      got: { order: 'o-1', carrier: 'dhl' },
      after: { by: 'parent', n: 1 },
    });
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'recoveries')).toBe('1');
    expect(await effects('before', 'after')).toEqual([1, 1]);
    expect(await engine.redis.exists(engine.client.keys.eventWaitsOf(handle.id))).toBe(0);
  });
});
