import { join } from 'node:path';

import { RunCrashedError, RunStalledError, WorkflowRunError } from '../../lib';
import { definePoisonWorkflows, POISON_MAX_RECOVERIES, poisonAttemptsKey, poisonPidKey } from '../fixtures/poison-worker';
import { eventually, TestEngine } from '../support/engine';
import { killWorkerProcess, spawnWorkerProcess, type WorkerProcess } from '../support/worker-process';

const FIXTURE = join(__dirname, '..', 'fixtures', 'poison-worker.ts');

/**
 * Poison runs: a run whose attempts keep killing their worker is recovered by the reaper
 * `maxRecoveries` times in a row, and then fails with RunCrashedError instead of crash-looping
 * the fleet. Attempts that make progress (a checkpoint or a finish) reset the count.
 */
describe('poison runs', () => {
  let engine: TestEngine;
  let children: WorkerProcess[] = [];

  beforeEach(() => {
    engine = new TestEngine();
    children = [];
  });

  afterEach(async () => {
    try {
      for (const child of children) await killWorkerProcess(child);
    } finally {
      await engine.close();
    }
  });

  it('a run whose step SIGKILLs its worker on every attempt fails with RunCrashedError after maxRecoveries, while other runs complete', async () => {
    const { poison, healthy } = definePoisonWorkflows(engine.registry, engine.redis, engine.prefix);
    const spawn = () => {
      const child = spawnWorkerProcess(FIXTURE, { REDFLOW_POISON_PREFIX: engine.prefix });
      children.push(child);
      return child;
    };
    // Two worker processes; like a process supervisor, the test restarts each one that dies.
    let live = [spawn(), spawn()];
    const handle = await engine.client.start(poison, {});
    const others = await Promise.all(Array.from({ length: 6 }, (_, i) => engine.client.start(healthy, { i })));

    await eventually(async () => {
      for (const dead of live.filter((c) => c.proc.exitCode !== null || c.proc.signalCode !== null)) {
        // Each one died by the poison step's own SIGKILL, not by a failure of its own.
        expect(await dead.exited).toEqual({ code: null, signal: 'SIGKILL' });
        live = live.filter((c) => c !== dead);
        if (children.length >= 8) throw new Error(`The poison run took down ${children.length - live.length} workers: ${dead.stderr}`);
        live.push(spawn());
      }
      return (await engine.client.getRun(handle.id))?.status === 'failed';
    }, 90_000);

    const crashes = POISON_MAX_RECOVERIES + 1;
    const error = await handle.result({ timeoutMs: 1_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunCrashedError);
    expect(error).toBeInstanceOf(RunStalledError);
    const lastPid = await engine.redis.get(poisonPidKey(engine.prefix));
    const { workerId } = error as RunCrashedError;
    expect(workerId).toMatch(new RegExp(`^poison-worker:.+:${lastPid}:[0-9a-f]{6}$`));
    expect(error).toMatchObject({ runId: handle.id, crashes, message: new RunCrashedError(handle.id, crashes, workerId).message });
    expect((error as Error).message).toContain(`crashed its worker 3 times in a row (last on worker "${workerId}")`);
    // The step ran once per crash, and never again once the run failed; recoveries did not use attempts.
    expect(Number(await engine.redis.get(poisonAttemptsKey(engine.prefix)))).toBe(crashes);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', attempt: 1 });
    expect(children.filter((c) => c.proc.signalCode === 'SIGKILL')).toHaveLength(crashes);

    // Every other run completes, on the workers that are left.
    const outputs = await Promise.all(others.map((h) => h.result({ timeoutMs: 30_000 })));
    expect(outputs).toEqual(others.map((_, i) => ({ i })));
    expect(Number(await engine.redis.get(poisonAttemptsKey(engine.prefix)))).toBe(crashes);
  }, 120_000);

  it('counts only crashes in a row: an attempt that stores a step resets the count', async () => {
    const steps = engine.registry.define('steps', {}, async ({ step }) => {
      const a = await step.run('a', () => 'a');
      const b = await step.run('b', () => 'b');
      return a + b;
    });
    const handle = await engine.client.start(steps, {});
    const { scripts } = engine.client;
    const runKey = engine.client.keys.run(handle.id);
    const crash = async (token: string, progress: boolean) => {
      // A worker claims the run with a 1 ms lease, maybe stores a step, and dies; the reaper finds it.
      expect((await scripts.claim('default', token, Date.now(), 1))?.runId).toBe(handle.id);
      if (progress) expect(await scripts.checkpoint(handle.id, token, Date.now(), ['s:a', `[1,1,1,${Date.now()},0,"a"]`])).toBe('ok');
      expect(await scripts.reap(Date.now() + 10, 100, 1)).toEqual([handle.id]);
    };
    await crash('dead-1:1', false);
    expect(await engine.redis.hmget(runKey, 'status', 'crashes', 'recoveries')).toEqual(['queued', '1', '1']);
    // This attempt stored step "a" before it died: its crash is the first of a new row.
    await crash('dead-2:1', true);
    expect(await engine.redis.hmget(runKey, 'status', 'crashes', 'recoveries')).toEqual(['queued', '1', '2']);

    const worker = await engine.worker({ runtime: { maxRecoveries: 1 } });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('ab');
    // The finish by the lease holder cleared the count; the total stays.
    expect(await engine.redis.hmget(runKey, 'crashes', 'recoveries')).toEqual([null, '2']);

    // Without progress in between, the second crash in a row fails the run (maxRecoveries 1).
    await worker.stop();
    const again = await engine.client.start(
      engine.registry.define('again', {}, () => 'never'),
      {},
    );
    for (const token of ['dead-3:1', 'dead-3:2']) {
      expect((await scripts.claim('default', token, Date.now(), 1))?.runId).toBe(again.id);
      expect(await scripts.reap(Date.now() + 10, 100, 1)).toEqual([again.id]);
    }
    await expect(again.result({ timeoutMs: 1_000 })).rejects.toMatchObject({ name: 'RunCrashedError', crashes: 2, workerId: 'dead-3' });
  });

  it('a run that fails with ordinary step errors fails with its own error, never RunCrashedError', async () => {
    let tries = 0;
    const flaky = engine.registry.define('flaky', { retries: { maxAttempts: 3, delay: 10 }, stepRetries: { maxAttempts: 1 } }, async ({ step }) => {
      await step.run('charge', () => {
        tries++;
        throw new Error(`card declined (${tries})`);
      });
    });
    await engine.worker({ runtime: { maxRecoveries: 1 } });
    const handle = await engine.client.start(flaky, {});
    const error = await handle.result({ timeoutMs: 10_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkflowRunError);
    expect(error).not.toBeInstanceOf(RunStalledError);
    expect((error as Error).message).toBe('card declined (3)');
    expect(tries).toBe(3);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', attempt: 3 });
    expect(await engine.redis.hmget(engine.client.keys.run(handle.id), 'crashes', 'recoveries')).toEqual([null, null]);
  });
});
