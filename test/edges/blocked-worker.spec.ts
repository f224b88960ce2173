import { join } from 'node:path';

import { abortedFlag, blockedFlag, blockingFlag, BLOCKY, BLOCKY_BETWEEN, defineBlocky, executionsKey } from '../fixtures/blocking-worker';
import { eventually, TestEngine } from '../support/engine';
import { killWorkerProcess, spawnWorkerProcess, whileAlive, type WorkerProcess } from '../support/worker-process';

const FIXTURE = join(__dirname, '..', 'fixtures', 'blocking-worker.ts');

describe('a worker whose event loop is blocked for longer than the lease', () => {
  let engine: TestEngine;
  let child: WorkerProcess | undefined;

  beforeEach(() => {
    engine = new TestEngine();
  });

  afterEach(async () => {
    await killWorkerProcess(child);
    await engine.close();
  });

  it("loses the run to another worker without failing it or storing anything more, aborts the blocked attempt's signal, and says why", async () => {
    child = spawnWorkerProcess(FIXTURE, { REDFLOW_BLOCK_PREFIX: engine.prefix });
    await whileAlive([child], 'blocking worker', async () => (await engine.client.getWorkflowMeta(BLOCKY)) !== null, 15_000);
    const handle = await engine.client.runByName(BLOCKY, {});
    await whileAlive([child], 'blocking worker', async () => (await engine.redis.get(blockedFlag(engine.prefix))) === '1', 10_000);

    // While the child is blocked, a worker here takes the run over once its lease expires.
    defineBlocky(engine.registry, engine.redis, engine.prefix);
    await engine.worker({ concurrency: 2 });
    expect(await handle.result({ timeoutMs: 10_000 })).toBe('ok');

    const count = async (step: string) => Number(await engine.redis.get(executionsKey(engine.prefix, step)));
    expect(await count('before')).toBe(1);
    // The blocking step ran in both processes (it never finished in the first); the next one once.
    expect(await count('block')).toBe(2);
    expect(await count('after')).toBe(1);
    const run = await engine.client.getRun(handle.id);
    expect(run).toMatchObject({ status: 'succeeded', attempt: 1 });
    expect(run?.error).toBeUndefined();
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'recoveries')).toBe('1');

    // The blocked worker wakes, finds the lease gone before writing, and warns once with the fix.
    await eventually(() => child!.stderr.includes(`Run "${handle.id}" was taken over by another worker`), 5_000);
    const lost = child.stderr.split('\n').filter((l) => l.includes(`Run "${handle.id}" was taken over`));
    expect(lost).toHaveLength(1);
    expect(lost[0]).toMatch(/was blocked for \d+ ms while it ran, and its lease \(leaseMs 1000 ms\) expired/);
    expect(lost[0]).toContain('Raise leaseMs, or move CPU-heavy work off the event loop (worker_threads).');
    // The blocked attempt's AbortSignal was aborted when it found its lease gone.
    const reason = await eventually(() => engine.redis.get(abortedFlag(engine.prefix)), 5_000);
    expect(reason).toContain('another worker took over the run');
    // The lag itself is reported too, as more than half the lease.
    expect(child.stderr).toMatch(/The event loop of worker "blocking-worker:[^"]+" was blocked for \d+ ms, more than half of leaseMs \(1000 ms\)/);
    // The stored steps are the taking-over worker's: the blocked one stored nothing after waking.
    const steps = await engine.client.getRunSteps(handle.id);
    expect(steps.map((s) => [s.name, s.status])).toEqual([
      ['before', 'succeeded'],
      ['block', 'succeeded'],
      ['after', 'succeeded'],
    ]);
  });

  it('a worker blocked past its lease before a step does not run that step once it wakes: the worker that took the run over ran it', async () => {
    child = spawnWorkerProcess(FIXTURE, { REDFLOW_BLOCK_PREFIX: engine.prefix });
    await whileAlive([child], 'blocking worker', async () => (await engine.client.getWorkflowMeta(BLOCKY_BETWEEN)) !== null, 15_000);
    const handle = await engine.client.runByName(BLOCKY_BETWEEN, {});
    await whileAlive([child], 'blocking worker', async () => (await engine.redis.get(blockingFlag(engine.prefix))) === '1', 10_000);

    // While the child is blocked (in handler code, with no step record to store), a worker here
    // takes the run over once its lease expires, and runs the step.
    defineBlocky(engine.registry, engine.redis, engine.prefix);
    await engine.worker({ concurrency: 2 });
    expect(await handle.result({ timeoutMs: 10_000 })).toBe('ok');
    const count = async (step: string) => Number(await engine.redis.get(executionsKey(engine.prefix, step)));
    expect(await count('between-after')).toBe(1);

    // The child wakes with its lease expired: it renews it before the step's function, finds the
    // run taken over, and stops without running the step.
    await eventually(() => child!.stderr.includes(`Run "${handle.id}" was taken over by another worker`), 5_000);
    expect(await count('between-after')).toBe(1);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'succeeded', attempt: 1 });
    expect((await engine.client.getRunSteps(handle.id)).map((s) => [s.name, s.status])).toEqual([['between-after', 'succeeded']]);
  });
});
