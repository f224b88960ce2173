import { Session } from 'node:inspector/promises';
import { writeFileSync } from 'node:fs';
import { createClient, startWorker, WorkflowRegistry, type WorkflowContext } from '../lib';
import { redisServers } from './bench-support';
const N = 30000;
async function main() {
  const servers = await redisServers.startStandalone();
  const registry = new WorkflowRegistry();
  let done = 0; let resolve!: () => void; const all = new Promise<void>((r) => (resolve = r));
  const wf = registry.define('p', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => { const out = await step.run('work', () => ({ ok: true, i: input.i })); if (++done === N) resolve(); return out; });
  const producer = createClient({ url: servers.url, prefix: 'p', registry });
  const consumer = createClient({ url: servers.url, prefix: 'p', registry });
  for (let s = 0; s < N; s += 1000) await Promise.all(Array.from({ length: 1000 }, (_, j) => producer.start(wf, { i: s + j })));
  const session = new Session(); session.connect();
  await session.post('HeapProfiler.enable'); await session.post('HeapProfiler.startSampling', { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  const t0 = performance.now(); const c0 = process.cpuUsage();
  const worker = await startWorker({ app: 'p', client: consumer, registry, concurrency: 50 });
  await all;
  const t1 = performance.now(); const c1 = process.cpuUsage(c0);
  const { profile } = await session.post('HeapProfiler.stopSampling');
  writeFileSync('/tmp/prof/heap.json', JSON.stringify(profile));
  console.log('runs/s', (N / ((t1 - t0) / 1000)).toFixed(0), 'node µs/run', ((c1.user + c1.system) / N).toFixed(1));
  await worker.stop(); await producer.close(); await consumer.close(); await redisServers.stopServers(servers);
}
main();
