/**
 * The cost breakdown of a one-step run (and a 10-step run), ours and BullMQ's, on a private redis-server:
 *
 *   npm run bench:cost                 # 10,000 runs per figure
 *   BENCH_RUNS=30000 npm run bench:cost
 *
 * Per system: the enqueue phase (all runs queued, no worker) and the processing phase (then a worker
 * at concurrency 50 until all succeeded) are measured apart, each as Redis CPU µs, commands (those
 * inside scripts included) and Node CPU µs per run, with the commands listed by name. See
 * docs/performance.md for what each one is.
 */
import { Worker as BullWorker, Queue } from 'bullmq';
import { Redis } from 'ioredis';

import { createClient, startWorker, WorkflowRegistry, type WorkflowContext } from '../lib';
import { envInt, redisServers, runMain } from './bench-support';
import { costBetween, formatBreakdown, formatUsec, snapshot, type PhaseCost } from './cost-model';

const RUNS = envInt('BENCH_RUNS', 10_000);
const CONCURRENCY = 50;
const CHUNK = 1000;

const registry = new WorkflowRegistry();
let done: () => void = () => undefined;
const oneStep = registry.define('cost-1', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
  const out = await step.run('work', () => ({ ok: true, i: input.i }));
  done();
  return out;
});
const tenSteps = registry.define('cost-10', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
  let sum = 0;
  for (let s = 0; s < 10; s++) sum += await step.run(`s${s}`, () => input.i + s);
  done();
  return sum;
});

function counter(n: number): Promise<void> {
  let count = 0;
  return new Promise<void>((resolve) => {
    done = () => {
      if (++count === n) resolve();
    };
  });
}

export interface SystemCost {
  enqueue: PhaseCost;
  processing: PhaseCost;
  bytesPerRun: number;
}

async function usedMemory(admin: Redis): Promise<number> {
  return Number(/^used_memory:(\d+)/m.exec(await admin.info('memory'))?.[1]);
}

/** Ours: `steps` 1 or 10. */
export async function oursCost(url: string, admin: Redis, runs: number, steps: 1 | 10): Promise<SystemCost> {
  await admin.flushall();
  const options = { url, prefix: `cost-${steps}`, registry };
  const producer = createClient(options);
  const consumer = createClient(options);
  try {
    const memBefore = await usedMemory(admin);
    const s0 = await snapshot(admin);
    const start = (i: number) => (steps === 1 ? producer.start(oneStep, { i }) : producer.start(tenSteps, { i }));
    for (let first = 0; first < runs; first += CHUNK) {
      await Promise.all(Array.from({ length: Math.min(CHUNK, runs - first) }, (_, j) => start(first + j)));
    }
    const s1 = await snapshot(admin);
    const all = counter(runs);
    const worker = await startWorker({ app: 'cost', client: consumer, registry, concurrency: CONCURRENCY });
    await all;
    const s2 = await snapshot(admin);
    await worker.stop();
    const memAfter = await usedMemory(admin);
    return { enqueue: costBetween(s0, s1, runs), processing: costBetween(s1, s2, runs), bytesPerRun: (memAfter - memBefore) / runs };
  } finally {
    await Promise.allSettled([producer.close(), consumer.close()]);
  }
}

/** BullMQ: no-op jobs (steps 1), or 10 `updateData` per job (steps 10). */
export async function bullCost(url: string, admin: Redis, runs: number, steps: 1 | 10): Promise<SystemCost> {
  await admin.flushall();
  const parsed = new URL(url);
  const connection = { host: parsed.hostname, port: Number(parsed.port), maxRetriesPerRequest: null };
  const name = `cost-${steps}`;
  const queue = new Queue(name, { connection });
  await queue.waitUntilReady();
  const memBefore = await usedMemory(admin);
  const s0 = await snapshot(admin);
  for (let start = 0; start < runs; start += CHUNK) {
    await queue.addBulk(
      Array.from({ length: Math.min(CHUNK, runs - start) }, (_, j) => ({
        name: 'noop',
        data: { i: start + j },
        opts: { removeOnComplete: false, removeOnFail: false },
      })),
    );
  }
  const s1 = await snapshot(admin);
  const all = counter(runs);
  const worker = new BullWorker(
    name,
    async (job) => {
      if (steps === 10) for (let s = 0; s < 10; s++) await job.updateData({ ...job.data, [`s${s}`]: s });
      done();
    },
    { connection, concurrency: CONCURRENCY },
  );
  await all;
  // The last jobs' moveToFinished may still be on the wire when the handler returned.
  while ((await queue.getCompletedCount()) < runs) await new Promise((r) => setTimeout(r, 1));
  const s2 = await snapshot(admin);
  await worker.close();
  await queue.close();
  const memAfter = await usedMemory(admin);
  return { enqueue: costBetween(s0, s1, runs), processing: costBetween(s1, s2, runs), bytesPerRun: (memAfter - memBefore) / runs };
}

function print(label: string, cost: SystemCost): void {
  console.log(`\n${label}: ${cost.bytesPerRun.toFixed(0)} B per finished run`);
  for (const phase of ['enqueue', 'processing'] as const) {
    const c = cost[phase];
    console.log(`  ${phase.padEnd(10)} Redis ${c.redisUs.toFixed(1)} µs, ${c.commands.toFixed(2)} commands, Node ${c.nodeUs.toFixed(1)} µs per run`);
    console.log(`    commands per run: ${formatBreakdown(c)}`);
    console.log(`    µs per run (commandstats; a script call includes its commands): ${formatUsec(c)}`);
  }
}

async function main(): Promise<number> {
  const servers = await redisServers.startStandalone();
  const admin = new Redis(servers.url, { maxRetriesPerRequest: null });
  try {
    const only = process.env.BENCH_ONLY;
    if (only !== 'bullmq') print('nestjs-redflow, 1 step', await oursCost(servers.url, admin, RUNS, 1));
    if (only !== 'ours') print('BullMQ, no-op job', await bullCost(servers.url, admin, RUNS, 1));
    if (process.env.BENCH_TEN) {
      if (only !== 'bullmq') print('nestjs-redflow, 10 steps', await oursCost(servers.url, admin, RUNS, 10));
      if (only !== 'ours') print('BullMQ, 10 updateData', await bullCost(servers.url, admin, RUNS, 10));
    }
    return 0;
  } finally {
    admin.disconnect();
    await redisServers.stopServers(servers);
  }
}

if (require.main === module) runMain(main);
