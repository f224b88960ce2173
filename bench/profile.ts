/**
 * Where the worker's Node CPU (or memory) goes while it processes one-step runs: 30,000 runs are
 * queued, then a worker at concurrency 50 runs them under the inspector's profiler.
 *
 *   npm run bench:profile                      # CPU: writes redflow.cpuprofile (open in Chrome DevTools)
 *   BENCH_PROFILE=heap npm run bench:profile   # allocations: writes redflow.heapprofile
 *
 * Both are printed too, as the functions and files with the largest share.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

import { createClient, startWorker, WorkflowRegistry, type WorkflowContext } from '../lib';
import { envInt, redisServers, runMain } from './bench-support';

const RUNS = envInt('BENCH_RUNS', 30_000);
const MODE = process.env.BENCH_PROFILE ?? 'cpu';
if (MODE !== 'cpu' && MODE !== 'heap') throw new Error(`BENCH_PROFILE must be cpu or heap, got "${MODE}".`);

interface ProfileNode {
  id?: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize?: number;
  children?: (ProfileNode | number)[];
}

function where(node: ProfileNode): { fn: string; file: string } {
  const { functionName, url, lineNumber } = node.callFrame;
  const file = url.replace(/.*node_modules\/([^/]+).*/, '$1').replace(/^.*?\/(lib|bench)\//, '$1/') || '(native)';
  return { fn: `${functionName || '(anonymous)'} ${file}:${lineNumber + 1}`, file };
}

function printTop(title: string, weights: Map<string, number>, total: number): void {
  console.log(`\n${title}`);
  for (const [key, weight] of [...weights].sort((a, b) => b[1] - a[1]).slice(0, 20))
    console.log(`${((100 * weight) / total).toFixed(1).padStart(6)} %  ${key}`);
}

function add(map: Map<string, number>, key: string, weight: number): void {
  map.set(key, (map.get(key) ?? 0) + weight);
}

/** Self weight per function and per file: CPU samples, or bytes allocated. */
function summarize(nodes: ProfileNode[], selfWeight: (node: ProfileNode) => number): void {
  const byFunction = new Map<string, number>();
  const byFile = new Map<string, number>();
  let total = 0;
  for (const node of nodes) {
    const weight = selfWeight(node);
    if (!weight) continue;
    const { fn, file } = where(node);
    add(byFunction, fn, weight);
    add(byFile, file, weight);
    total += weight;
  }
  printTop('by function (self)', byFunction, total);
  printTop('by file (self)', byFile, total);
}

function flatten(root: ProfileNode, out: ProfileNode[] = []): ProfileNode[] {
  out.push(root);
  for (const child of root.children ?? []) if (typeof child !== 'number') flatten(child, out);
  return out;
}

async function main(): Promise<number> {
  const servers = await redisServers.startStandalone();
  const registry = new WorkflowRegistry();
  let done = 0;
  let allDone!: () => void;
  const all = new Promise<void>((resolve) => (allDone = resolve));
  const wf = registry.define('profile', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
    const out = await step.run('work', () => ({ ok: true, i: input.i }));
    if (++done === RUNS) allDone();
    return out;
  });
  const producer = createClient({ url: servers.url, prefix: 'profile', registry });
  const consumer = createClient({ url: servers.url, prefix: 'profile', registry });
  const session = new Session();
  try {
    for (let first = 0; first < RUNS; first += 1000) {
      await Promise.all(Array.from({ length: Math.min(1000, RUNS - first) }, (_, j) => producer.start(wf, { i: first + j })));
    }
    session.connect();
    if (MODE === 'cpu') {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 100 });
      await session.post('Profiler.start');
    } else {
      await session.post('HeapProfiler.enable');
      await session.post('HeapProfiler.startSampling', {
        samplingInterval: 4096,
        includeObjectsCollectedByMajorGC: true,
        includeObjectsCollectedByMinorGC: true,
      });
    }
    const started = performance.now();
    const cpu = process.cpuUsage();
    const worker = await startWorker({ app: 'profile', client: consumer, registry, concurrency: 50 });
    await all;
    const seconds = (performance.now() - started) / 1000;
    const used = process.cpuUsage(cpu);
    await worker.stop();
    console.log(
      `${RUNS} runs in ${seconds.toFixed(2)} s under the profiler: ${(RUNS / seconds).toFixed(0)} runs/s, Node ${((used.user + used.system) / RUNS).toFixed(1)} µs per run`,
    );
    if (MODE === 'cpu') {
      const { profile } = await session.post('Profiler.stop');
      writeFileSync('redflow.cpuprofile', JSON.stringify(profile));
      const samples = new Map<number, number>();
      for (const id of profile.samples ?? []) samples.set(id, (samples.get(id) ?? 0) + 1);
      summarize(profile.nodes as ProfileNode[], (node) => samples.get(node.id ?? -1) ?? 0);
      console.log('\nwritten: redflow.cpuprofile');
    } else {
      const { profile } = await session.post('HeapProfiler.stopSampling');
      writeFileSync('redflow.heapprofile', JSON.stringify(profile));
      summarize(flatten(profile.head as ProfileNode), (node) => node.selfSize ?? 0);
      console.log('\nwritten: redflow.heapprofile');
    }
    return 0;
  } finally {
    session.disconnect();
    await Promise.allSettled([producer.close(), consumer.close()]);
    await redisServers.stopServers(servers);
  }
}

runMain(main);
