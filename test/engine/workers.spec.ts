import { hostname } from 'node:os';

import { WorkflowRegistry, type RedflowLogger } from '../../lib';
import { deferred, eventually, FAST_RUNTIME, TestEngine } from '../support/engine';

const silent: RedflowLogger = { log() {}, warn() {}, error() {} };

/**
 * The workers registry: each worker's presence call (at start, then every heartbeat) records its
 * host, pid, queues, versions, concurrency and active runs in the workers hash; `listWorkers`
 * lists the entries that have not lapsed; a stopped worker is gone at once, and a worker that
 * died lapses 3 heartbeats after its last one.
 */
describe('listWorkers', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('lists a started worker with its fields, counts its active runs at the next heartbeat, and forgets it once it stops', async () => {
    const gate = deferred();
    const registry = new WorkflowRegistry();
    registry.define('slow', { queue: 'work', version: 3 }, async () => gate.promise);
    const before = Date.now();
    const worker = await engine.worker({ registry, queues: ['work'], concurrency: 4, runtime: { ...FAST_RUNTIME, heartbeatInterval: 100 }, logger: silent });
    const [listed] = await engine.client.listWorkers();
    expect(listed).toEqual({
      workerId: worker.workerId,
      host: hostname(),
      pid: process.pid,
      queues: ['work'],
      versions: [{ workflow: 'slow', version: 3 }],
      concurrency: 4,
      active: 0,
      startedAt: expect.any(Number),
      heartbeatAt: expect.any(Number),
      expiresAt: expect.any(Number),
    });
    expect(listed.startedAt).toBeGreaterThanOrEqual(before);
    expect(listed.expiresAt - listed.heartbeatAt).toBe(300);

    const handle = await engine.client.runByName('slow', {});
    await eventually(async () => (await engine.client.listWorkers())[0]?.active === 1);
    gate.resolve();
    await handle.result({ timeoutMs: 5000 });
    await worker.stop();
    expect(await engine.client.listWorkers()).toEqual([]);
  });

  it('drops the entry of a worker that stopped renewing it, on read and at the next presence call of another worker', async () => {
    const registry = new WorkflowRegistry();
    registry.define('quick', {}, () => 'done');
    const worker = await engine.worker({ registry, runtime: { ...FAST_RUNTIME, heartbeatInterval: 100 }, logger: silent });
    // A worker that died: an entry that lapsed long ago, and one that is not JSON.
    const stale = JSON.stringify({ workerId: 'dead', expiresAt: Date.now() - 1000 });
    await engine.redis.hset(engine.client.keys.workers(), 'dead', stale, 'garbage', 'not json');
    expect((await engine.client.listWorkers()).map((w) => w.workerId)).toEqual([worker.workerId]);
    await eventually(async () => Object.keys(await engine.redis.hgetall(engine.client.keys.workers())).length === 1);
  });
});
