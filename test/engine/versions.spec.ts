import { ConfigurationError, WorkflowRegistry, type RedflowLogger, type WorkflowContext } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

/** A logger that keeps the warnings, to assert on what a worker said. */
function recordingLogger(): RedflowLogger & { warnings: string[] } {
  const warnings: string[] = [];
  return { warnings, log: () => undefined, warn: (message: string) => warnings.push(message), error: () => undefined };
}

/**
 * Workflow versions: a run keeps the version it started on, only a worker with that version
 * claims it, new runs start on the latest registered version, and the registry tells when a
 * version has runs but no worker.
 */
describe('workflow versions', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  /** `checkout` at `version`: reserves, waits for the "go" signal, and says which code ran. */
  function checkout(version: number, ran: Map<string, number>) {
    const registry = new WorkflowRegistry();
    const definition = registry.define('checkout', { version }, async ({ step, input, run }: WorkflowContext<{ n: number }>) => {
      ran.set(run.id, version);
      await step.run(`reserve-v${version}`, () => input.n);
      await step.waitForSignal('go', 'go');
      return { code: `v${version}`, n: input.n };
    });
    return { registry, definition };
  }

  it('runs v1 and v2 side by side: every v1 run finishes on v1 code, new runs take v2, and v1 runs wait while no worker has v1', async () => {
    const ranV1 = new Map<string, number>();
    const ranV2 = new Map<string, number>();
    const v1 = checkout(1, ranV1);
    const v2 = checkout(2, ranV2);
    const log1 = recordingLogger();
    const log2 = recordingLogger();
    const worker1 = await engine.worker({ app: 'shop', registry: v1.registry, logger: log1 });
    // By name, without a definition here: the latest registered version, 1.
    const parked = await Promise.all(Array.from({ length: 20 }, (_, n) => engine.client.runByName('checkout', { n })));
    await eventually(async () => (await engine.client.countRuns({ workflow: 'checkout', version: 1, status: 'scheduled' })) === 20);

    const worker2 = await engine.worker({ app: 'shop', registry: v2.registry, logger: log2 });
    await worker1.stop();
    // A new run by name takes v2, which the v2 worker runs.
    const fresh = await engine.client.runByName('checkout', { n: 100 });
    await eventually(async () => (await engine.client.getRun(fresh.id))?.status === 'scheduled');
    expect(await engine.client.getRun(fresh.id)).toMatchObject({ version: 2, queue: 'default' });
    expect(await engine.client.signal(fresh.id, 'go')).toBe(true);
    await expect(fresh.result({ timeoutMs: 5_000 })).resolves.toEqual({ code: 'v2', n: 100 });

    // The v1 runs get their signal while no worker has v1: they are queued, and stay queued.
    for (const handle of parked) expect(await engine.client.signal(handle.id, 'go')).toBe(true);
    await eventually(async () => (await engine.client.countRuns({ workflow: 'checkout', version: 1, status: 'queued' })) === 20);
    await eventually(() => log2.warnings.some((w) => w.includes('no worker for checkout v1')), 8_000);
    const meta = await engine.client.getWorkflowMeta('checkout');
    expect(meta).toMatchObject({ version: 2, queue: 'default' });
    expect(meta?.versions).toEqual([
      expect.objectContaining({ version: 1, workers: [], noWorker: 'no worker for checkout v1' }),
      expect.objectContaining({ version: 2, workers: [worker2.workerId] }),
    ]);
    expect(await engine.client.countRuns({ workflow: 'checkout', version: 1, status: 'queued' })).toBe(20);

    // A v1 worker comes back: every v1 run finishes on v1 code.
    const log1b = recordingLogger();
    const worker1b = await engine.worker({ app: 'shop', registry: checkout(1, ranV1).registry, logger: log1b });
    const results = await Promise.all(parked.map((handle) => handle.result({ timeoutMs: 10_000 })));
    expect(results).toEqual(Array.from({ length: 20 }, (_, n) => ({ code: 'v1', n })));
    // The v2 code never ran a v1 run, and no worker claimed a run of a version it lacks.
    for (const handle of parked) expect(ranV2.has(handle.id)).toBe(false);
    expect([...ranV2.keys()]).toEqual([fresh.id]);
    expect([...log1.warnings, ...log2.warnings, ...log1b.warnings].filter((w) => w.includes('hands such runs back'))).toEqual([]);
    // The warning was logged once, and the registry no longer shows it.
    expect(log2.warnings.filter((w) => w.includes('no worker for checkout v1'))).toHaveLength(1);
    const after = await engine.client.getWorkflowMeta('checkout');
    expect(after?.versions).toEqual([
      expect.objectContaining({ version: 1, workers: [worker1b.workerId] }),
      expect.objectContaining({ version: 2, workers: [worker2.workerId] }),
    ]);
    expect(after?.versions.some((v) => v.noWorker)).toBe(false);
    expect(await engine.client.countRuns({ workflow: 'checkout', version: 1, status: 'succeeded' })).toBe(20);
    expect(await engine.client.countRuns({ workflow: 'checkout', version: 2, status: 'succeeded' })).toBe(1);
  }, 30_000);

  it("runByName(..., { version }) pins a version, start(definition) uses the definition's, and listRuns / countRuns filter by version", async () => {
    const ran = new Map<string, number>();
    const v1 = checkout(1, ran);
    const v2 = checkout(2, ran);
    await engine.worker({ app: 'shop-v1', registry: v1.registry });
    await engine.worker({ app: 'shop-v2', registry: v2.registry });
    const latest = await engine.client.runByName('checkout', { n: 1 });
    const pinned = await engine.client.runByName('checkout', { n: 2 }, { version: 1 });
    const byDefinition = await engine.client.start(v1.definition, { n: 3 });
    const ids = [latest.id, pinned.id, byDefinition.id];
    await eventually(async () => (await Promise.all(ids.map((id) => engine.client.getRun(id)))).every((r) => r?.status === 'scheduled'));
    for (const id of ids) await engine.client.signal(id, 'go');
    await expect(latest.result({ timeoutMs: 5_000 })).resolves.toEqual({ code: 'v2', n: 1 });
    await expect(pinned.result({ timeoutMs: 5_000 })).resolves.toEqual({ code: 'v1', n: 2 });
    await expect(byDefinition.result({ timeoutMs: 5_000 })).resolves.toEqual({ code: 'v1', n: 3 });
    expect(await engine.client.getRun(pinned.id)).toMatchObject({ version: 1, queue: 'default', status: 'succeeded' });
    expect(await engine.client.getRun(latest.id)).toMatchObject({ version: 2, queue: 'default', status: 'succeeded' });

    const listed = await engine.client.listRuns({ workflow: 'checkout', version: 1 });
    expect(listed.map((r) => r.id).sort()).toEqual([pinned.id, byDefinition.id].sort());
    expect((await engine.client.listRunSummaries({ workflow: 'checkout', version: 2, status: 'succeeded' })).map((r) => [r.id, r.version])).toEqual([
      [latest.id, 2],
    ]);
    expect(await engine.client.listRuns({ workflow: 'checkout', version: 1, limit: 1, offset: 1 })).toHaveLength(1);
    expect(await engine.client.countRuns({ workflow: 'checkout', version: 1 })).toBe(2);
    expect(await engine.client.countRuns({ workflow: 'checkout', version: 2, status: 'succeeded' })).toBe(1);
    expect(await engine.client.countRuns({ workflow: 'checkout', version: 3 })).toBe(0);
    expect(await engine.client.countRuns({ workflow: 'checkout' })).toBe(3);
  });

  it('never runs a v1 run on v2 code when one worker has workflow A at v2 and B at v1 on the same queue', async () => {
    const ranBy = new Map<string, string>();
    const mixed = new WorkflowRegistry();
    mixed.define('a', { version: 2 }, ({ run }) => (ranBy.set(run.id, 'a v2'), 'a v2'));
    mixed.define('b', {}, ({ run }) => (ranBy.set(run.id, 'b v1'), 'b v1'));
    const oldA = new WorkflowRegistry();
    oldA.define('a', {}, ({ run }) => (ranBy.set(run.id, 'a v1'), 'a v1'));
    const mixedLog = recordingLogger();
    // The mixed worker claims from "default" (for b) and "default@v2" (for a).
    const mixedWorker = await engine.worker({ app: 'mixed', registry: mixed, logger: mixedLog, concurrency: 4 });
    expect(mixedWorker.liveness.queues.sort()).toEqual(['default', 'default@v2']);
    const handles = await Promise.all(Array.from({ length: 5 }, () => engine.client.runByName('a', {}, { version: 1 })));
    // Only the mixed worker runs: its claims leave a's v1 runs queued, never started, and it warns once.
    await eventually(() => mixedLog.warnings.some((w) => w.includes('has workflow "a" at v2, and claims from queue "default"')));
    const b = await engine.client.runByName('b', {});
    await expect(b.result({ timeoutMs: 5_000 })).resolves.toBe('b v1');
    expect(mixedLog.warnings.filter((w) => w.includes('runs of "a" v1 wait: it leaves them there for a worker with version 1'))).toHaveLength(1);
    for (const handle of handles) expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'queued', attempt: 0 });
    await engine.worker({ app: 'old', registry: oldA });
    for (const handle of handles) await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('a v1');
    expect(handles.map((h) => ranBy.get(h.id))).toEqual(Array(5).fill('a v1'));
    for (const handle of handles) expect((await engine.client.getRun(handle.id))?.attempt).toBe(1);
  }, 20_000);

  it('hands back, never runs, a v1 run a worker claimed for a workflow defined at v2 in its registry after it started', async () => {
    const late = new WorkflowRegistry();
    late.define('b', {}, () => 'b v1');
    const lateLog = recordingLogger();
    await engine.worker({ app: 'late', registry: late, logger: lateLog });
    let ranV2 = 0;
    late.define('a', { version: 2 }, () => ++ranV2);
    const oldA = new WorkflowRegistry();
    oldA.define('a', {}, () => 'a v1');
    await engine.client.syncRegistry(oldA, { owner: 'old' });
    const handle = await engine.client.runByName('a', {}, { version: 1 });
    await eventually(() =>
      lateLog.warnings.some((w) =>
        w.includes('claimed a run of workflow "a" v1 but has v2: it hands such runs back for a worker with version 1, and its claims leave them from now on'),
      ),
    );
    expect(await engine.client.getRun(handle.id)).toMatchObject({ attempt: 1 });
    await engine.worker({ app: 'old', registry: oldA });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('a v1');
    expect(ranV2).toBe(0);
  });

  it('a claim that leaves runs of another version puts them back in their order, takes the run behind them, and says so when it takes none', async () => {
    engine.registry.define('a', {}, () => 'a');
    engine.registry.define('b', {}, () => 'b');
    await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
    const [a1, b1, a2, a3] = [
      await engine.client.runByName('a', {}),
      await engine.client.runByName('b', {}),
      await engine.client.runByName('a', {}),
      await engine.client.runByName('a', {}),
    ];
    const { scripts, keys } = engine.client;
    const ready = () => engine.redis.lrange(keys.ready('default'), 0, -1);
    // No worker: claims are made by hand, as a worker that has "a" at v2 makes them on "default".
    expect(await scripts.claim('default', 'w:1', Date.now(), 60_000, ['a'])).toMatchObject({ runId: b1.id });
    expect(await ready()).toEqual([a1.id, a2.id, a3.id]);
    expect(await scripts.claim('default', 'w:2', Date.now(), 60_000, ['a'])).toEqual({ skipped: 'a' });
    expect(await ready()).toEqual([a1.id, a2.id, a3.id]);
    for (const handle of [a1, a2, a3]) expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'queued', attempt: 0 });
    // A worker with "a" at v1 takes them in order.
    expect((await scripts.claim('default', 'w:3', Date.now(), 60_000))?.runId).toBe(a1.id);
    expect(await ready()).toEqual([a2.id, a3.id]);
    await engine.redis.del(keys.ready('default'));
    expect(await scripts.claim('default', 'w:4', Date.now(), 60_000, ['a'])).toBeNull();
  });

  it('a claim that pops 1,000 runs of another version in a row moves them behind the rest, so the next claim reaches the run after them', async () => {
    engine.registry.define('a', {}, () => 'a');
    engine.registry.define('b', {}, () => 'b');
    await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
    const left = await Promise.all(Array.from({ length: 1_001 }, () => engine.client.runByName('a', {})));
    const b = await engine.client.runByName('b', {});
    const { scripts, keys } = engine.client;
    expect(await scripts.claim('default', 'w:1', Date.now(), 60_000, ['a'])).toEqual({ skipped: 'a' });
    const ids = left.map((h) => h.id);
    expect(await engine.redis.lrange(keys.ready('default'), 0, -1)).toEqual([ids[1_000], b.id, ...ids.slice(0, 1_000)]);
    expect(await scripts.claim('default', 'w:2', Date.now(), 60_000, ['a'])).toMatchObject({ runId: b.id });
    expect(await engine.redis.llen(keys.ready('default'))).toBe(1_001);
  });

  it('refuses a version that is not a positive integer, and a version filter without a workflow, with ConfigurationError', async () => {
    const registry = new WorkflowRegistry();
    for (const version of [0, -1, 1.5, '2'] as unknown[]) {
      expect(() => registry.define('bad', { version: version as number }, () => 1)).toThrow(ConfigurationError);
    }
    expect(() => registry.define('bad', { version: 0 }, () => 1)).toThrow('version of workflow "bad" must be a positive integer (1, 2, 3, ...), got 0.');
    expect(() => registry.define('bad', { queue: 'q@v2' }, () => 1)).toThrow('queue of workflow "bad" must not contain "@"');
    await expect(engine.client.countRuns({ version: 1 })).rejects.toThrow('countRuns version needs a workflow');
    await expect(engine.client.listRuns({ workflow: 'checkout', version: 0 })).rejects.toThrow(ConfigurationError);
    await expect(engine.client.runByName('checkout', {}, { version: 1.5 })).rejects.toThrow('The run option version must be a positive integer');
  });
});
