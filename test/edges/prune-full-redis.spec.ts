import { randomBytes } from 'node:crypto';

import { createClient, RedisWriteRefusedError, startWorker, WorkflowRegistry, type RedflowLogger, type WorkflowClient } from '../../lib';
import { FAST_RUNTIME } from '../support/engine';
import { OwnRedis } from '../support/own-redis';

const quiet: RedflowLogger = { log() {}, warn() {}, error() {} };

/**
 * `prune` only deletes, so, like retention, it has no write check: on a Redis that refuses writes
 * because it is full, it still runs, and the memory it frees lets writes through again.
 */
describe('prune on a full Redis', () => {
  let server: OwnRedis;
  let client: WorkflowClient;

  beforeAll(async () => {
    server = await OwnRedis.start(['--maxmemory-policy', 'noeviction']);
  });

  afterAll(async () => {
    server.cli('CONFIG', 'SET', 'maxmemory', '0');
    await client?.close();
    await server.stop();
  });

  it('deletes ended runs while writes are refused, after which runs start again', async () => {
    const registry = new WorkflowRegistry();
    const report = registry.define('report', { maxConcurrency: Infinity }, () => 'done');
    client = createClient({ url: server.url, prefix: `prune-full:${randomBytes(4).toString('hex')}`, registry, logger: quiet });
    const worker = await startWorker({ app: 'prune-full', client, registry, concurrency: 8, runtime: FAST_RUNTIME, logger: quiet });
    const page = 'x'.repeat(10_000);
    const handles = await Promise.all(Array.from({ length: 200 }, (_, i) => client.start(report, { i, page })));
    await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
    await worker.stop();

    const used = Number(/used_memory:(\d+)/.exec(server.cli('INFO', 'memory'))![1]);
    // Well below what Redis holds (its used memory moves by itself), yet above what it holds once the
    // 200 runs of 10 KB are pruned.
    server.cli('CONFIG', 'SET', 'maxmemory', String(used - 1_000_000));
    await expect(client.start(report, { i: -1, page })).rejects.toThrow(RedisWriteRefusedError);

    await expect(client.prune({ olderThan: 0 })).resolves.toEqual({ deleted: 200 });
    expect(await client.countRuns()).toBe(0);
    const again = await client.start(report, { i: 200, page });
    expect(await client.getRun(again.id)).toMatchObject({ status: 'queued', input: { i: 200, page } });
  });
});
