/**
 * Benchmark: nestjs-redflow against BullMQ on the same, isolated Redis, alternating the two.
 *
 *   npm run bench                      # defaults: 2 rounds, 10,000 runs, 300 pickup samples
 *   BENCH_ROUNDS=3 BENCH_RUNS=20000 BENCH_PICKUP=500 npm run bench
 *   BENCH_FSYNC=always npm run bench   # Redis with appendonly yes and appendfsync always
 *   BENCH_ONLY=queues npm run bench    # only the plain queue, priorities and concurrency keys, side by side
 *
 * Per round and system (ours first, then BullMQ, on a fresh prefix / queue after FLUSHALL):
 *   - processing: enqueue all N first, then start the worker (concurrency 50); time until all succeeded.
 *     Redis CPU µs, commands and Node CPU µs per run are taken over its enqueue and processing.
 *   - ten steps: the same with ten `step.run` per run, against a BullMQ job calling `updateData` ten times.
 *   - end to end: worker started and idle; time from the first enqueue (chunks of 1000, concurrent)
 *     until all succeeded. Redis used_memory is read before (after FLUSHALL and worker start) and
 *     after (all done); the difference over N is the memory per finished run / completed job.
 *   - idle pickup: one run at a time on an idle worker (concurrency 1), from just before the enqueue
 *     call to the handler's first line.
 * nestjs-redflow's processing and end-to-end figures are also taken with the event stream off, and
 * with tracing on (`redflowTracing()` of `nestjs-redflow/otel`) while no OpenTelemetry SDK is
 * registered: what an app that installed the API but exports nothing pays. And the payload codec's
 * cost: runs with a 1 KiB input, step output and output, queued first, processed without a codec
 * and with `aesGcmCodec` (AES-256-GCM, no compression). And the cost of priorities and concurrency keys:
 * the processing workload with runs of priorities 1 to 3, and with runs under a concurrency key (100
 * keys, limit 10 each: the limit is never reached at C=50, so what is measured is the mechanism).
 * Completion is counted in the handler (no per-run polling), then confirmed from Redis: ZCARD of the
 * succeeded runs (ours, countRuns) or the completed count (BullMQ) must equal N.
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Worker as BullWorker, Queue } from 'bullmq';
import { Redis } from 'ioredis';

import {
  aesGcmCodec,
  createClient,
  startWorker,
  WorkflowRegistry,
  type PayloadCodec,
  type RedflowTracing,
  type WorkflowClient,
  type WorkflowContext,
} from '../lib';
import { redflowTracing } from '../lib/otel';
import { envInt, redisServers, runMain } from './bench-support';
import { costBetween, snapshot, type RedisSnapshot } from './cost-model';

const ROUNDS = envInt('BENCH_ROUNDS', 2);
const RUNS = envInt('BENCH_RUNS', 10_000);
const PICKUP = envInt('BENCH_PICKUP', 300);
const CONCURRENCY = 50;
const CHUNK = 1000;
const WARMUP = 10;
const WAIT_TIMEOUT_MS = 120_000;
const FSYNC = process.env.BENCH_FSYNC ?? '';
const ONLY_QUEUES = process.env.BENCH_ONLY === 'queues';
if (process.env.BENCH_ONLY !== undefined && !ONLY_QUEUES) throw new Error(`BENCH_ONLY must be "queues", got "${process.env.BENCH_ONLY}".`);
if (FSYNC && !['always', 'everysec', 'no'].includes(FSYNC)) throw new Error(`BENCH_FSYNC must be always, everysec or no, got "${FSYNC}".`);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves once `hit()` was called `target` times. */
class Counter {
  count = 0;
  readonly done: Promise<void>;
  private resolve!: () => void;
  constructor(readonly target: number) {
    this.done = new Promise<void>((resolve) => (this.resolve = resolve));
  }
  hit(): void {
    if (++this.count === this.target) this.resolve();
  }
}

/** Polls `check` every millisecond (used once per phase, after the handler counter reached N). */
async function waitUntil(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + WAIT_TIMEOUT_MS;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}.`);
    await sleep(1);
  }
}

/** Rejects after WAIT_TIMEOUT_MS so a stuck phase fails instead of hanging. */
function withTimeout<T>(what: string, promise: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`Timed out waiting for ${what}.`)), WAIT_TIMEOUT_MS)));
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function chunks(n: number, size: number): number[][] {
  const out: number[][] = [];
  for (let start = 0; start < n; start += size) out.push(Array.from({ length: Math.min(size, n - start) }, (_, j) => start + j));
  return out;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

interface Figures {
  processing: number;
  /** Ten-step workflows (ours) or jobs doing 10 `updateData` (BullMQ), queued first: runs/s. */
  tenSteps: number;
  endToEnd: number;
  pickupP50: number;
  pickupP99: number;
  bytesPerRun: number;
  /** Redis CPU µs per run, enqueue and processing (the processing figure's runs). */
  redisUs: number;
  /** Commands per run, those inside scripts included, enqueue and processing. */
  commands: number;
  /** Node CPU µs per run of this process (producer and worker), enqueue and processing. */
  nodeUs: number;
}

/** The cost of the processing figure's runs, enqueue included (bench/cost-model.ts). */
interface RunCost {
  redisUs: number;
  commands: number;
  nodeUs: number;
}

function totalCost(s0: RedisSnapshot, s2: RedisSnapshot, runs: number): RunCost {
  const cost = costBetween(s0, s2, runs);
  return { redisUs: cost.redisUs, commands: cost.commands, nodeUs: cost.nodeUs };
}

type System = 'ours' | 'bullmq';

// ---------------------------------------------------------------------------------------------
// Shared Redis helpers (an admin connection of our own, not used by either system)

class Admin {
  readonly redis: Redis;
  constructor(url: string) {
    this.redis = new Redis(url, { maxRetriesPerRequest: null });
  }
  async flushAll(): Promise<void> {
    await this.redis.flushall();
  }
  async usedMemory(): Promise<number> {
    const info = await this.redis.info('memory');
    const match = /^used_memory:(\d+)/m.exec(info);
    if (!match) throw new Error('INFO memory has no used_memory field.');
    return Number(match[1]);
  }
  async serverVersion(): Promise<string> {
    const info = await this.redis.info('server');
    return /^redis_version:(\S+)/m.exec(info)?.[1] ?? 'unknown';
  }
}

// ---------------------------------------------------------------------------------------------
// nestjs-redflow

/** What the bench workflow's handler reports; swapped per phase. */
const hooks: { started: () => void; done: () => void } = { started: () => undefined, done: () => undefined };

const registry = new WorkflowRegistry();
const benchWorkflow = registry.define('bench', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
  hooks.started();
  const out = await step.run('work', () => ({ ok: true, i: input.i }));
  hooks.done();
  return out;
});

/** Ten steps per run: what a job calling `updateData` ten times is compared with. */
const tenStepWorkflow = registry.define('bench-ten', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
  let sum = 0;
  for (let s = 0; s < 10; s++) sum += await step.run(`s${s}`, () => input.i + s);
  hooks.done();
  return sum;
});

/** The same one-step run with a priority (the runs of a round cycle through 1, 2 and 3). */
const prioWorkflow = registry.define('bench-prio', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
  const out = await step.run('work', () => ({ ok: true, i: input.i }));
  hooks.done();
  return out;
});

/** The same one-step run under a concurrency key: 100 keys, 10 at once each (not reached at C=50). */
const keyedWorkflow = registry.define(
  'bench-keyed',
  { maxConcurrency: Infinity, concurrency: { key: (input: { i: number }) => `tenant-${input.i % 100}`, limit: 10 } },
  async ({ input, step }: WorkflowContext<{ i: number }>) => {
    const out = await step.run('work', () => ({ ok: true, i: input.i }));
    hooks.done();
    return out;
  },
);

/** A run that carries 1 KiB both ways: input, one step's output and the run's output (the codec figures). */
const KIB = 'abcdefghijklmnopqrstuvwxyz0123456789'.repeat(29).slice(0, 1000);
const kibWorkflow = registry.define('bench-kib', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number; blob: string }>) => {
  const out = await step.run('echo', () => ({ i: input.i, blob: input.blob }));
  hooks.done();
  return out;
});

interface OursSetup {
  producer: WorkflowClient;
  consumer: WorkflowClient;
  stop(): Promise<void>;
}

/** A producer client and a worker, each on its own connection, on a fresh prefix. */
/** The event stream setting of the clients below: the default (on), or off for the side-by-side figures. */
let oursEvents: false | undefined;
/** The tracing setting of the clients below: none (default), or `redflowTracing()` for the tracing figures. */
let oursTracing: RedflowTracing | undefined;
/** The payload codec of the clients below: none (default), or `aesGcmCodec` for the codec figures. */
let oursCodec: PayloadCodec | undefined;

function oursClients(url: string, prefix: string): { producer: WorkflowClient; consumer: WorkflowClient } {
  const options = { url, prefix, registry, events: oursEvents, tracing: oursTracing, codec: oursCodec };
  return { producer: createClient(options), consumer: createClient(options) };
}

async function oursWorker(url: string, prefix: string, concurrency: number, clients = oursClients(url, prefix)): Promise<OursSetup> {
  const { producer, consumer } = clients;
  let worker: Awaited<ReturnType<typeof startWorker>> | undefined;
  try {
    worker = await startWorker({ app: 'bench', client: consumer, registry, concurrency });
  } catch (error) {
    await Promise.allSettled([producer.close(), consumer.close()]);
    throw error;
  }
  const started = worker;
  return {
    producer,
    consumer,
    async stop() {
      await started.stop();
      await Promise.allSettled([producer.close(), consumer.close()]);
    },
  };
}

async function oursEnqueueAll(producer: WorkflowClient, n: number): Promise<void> {
  for (const chunk of chunks(n, CHUNK)) await Promise.all(chunk.map((i) => producer.start(benchWorkflow, { i })));
}

async function oursConfirm(producer: WorkflowClient, n: number): Promise<void> {
  await waitUntil(`${n} succeeded runs`, async () => (await producer.countRuns({ status: 'succeeded' })) >= n);
  const [succeeded, failed, running, queued] = await Promise.all(
    (['succeeded', 'failed', 'running', 'queued'] as const).map((status) => producer.countRuns({ status })),
  );
  if (succeeded !== n || failed || running || queued) {
    throw new Error(`ours: expected ${n} succeeded runs, got succeeded=${succeeded} failed=${failed} running=${running} queued=${queued}.`);
  }
  const [sample] = await producer.listRuns({ status: 'succeeded', limit: 1 });
  const output = sample?.output as { ok?: boolean } | undefined;
  if (!output?.ok) throw new Error(`ours: a succeeded run has an unexpected output: ${JSON.stringify(sample?.output)}.`);
}

/**
 * Enqueues RUNS runs with `enqueue`, then starts a worker and times it until every handler ended;
 * the Redis and Node cost per run is taken over both phases, and `confirm` checks Redis after.
 */
async function oursQueuedFirst(
  url: string,
  admin: Admin,
  prefix: string,
  enqueue: (producer: WorkflowClient) => Promise<void>,
  confirm: (producer: WorkflowClient) => Promise<void>,
): Promise<{ rate: number; cost: RunCost }> {
  await admin.flushAll();
  const clients = oursClients(url, prefix);
  let setup: OursSetup | undefined;
  try {
    const s0 = await snapshot(admin.redis);
    await enqueue(clients.producer);
    const counter = new Counter(RUNS);
    hooks.done = () => counter.hit();
    const t0 = performance.now();
    setup = await oursWorker(url, prefix, CONCURRENCY, clients);
    await withTimeout(`ours ${prefix}`, counter.done);
    const rate = RUNS / ((performance.now() - t0) / 1000);
    const cost = totalCost(s0, await snapshot(admin.redis), RUNS);
    await confirm(clients.producer);
    return { rate, cost };
  } finally {
    hooks.done = () => undefined;
    if (setup) await setup.stop();
    else await Promise.allSettled([clients.producer.close(), clients.consumer.close()]);
  }
}

function oursProcessing(url: string, admin: Admin, prefix: string): Promise<{ rate: number; cost: RunCost }> {
  return oursQueuedFirst(
    url,
    admin,
    prefix,
    (producer) => oursEnqueueAll(producer, RUNS),
    (producer) => oursConfirm(producer, RUNS),
  );
}

async function oursTenSteps(url: string, admin: Admin, prefix: string): Promise<number> {
  const { rate } = await oursQueuedFirst(
    url,
    admin,
    prefix,
    async (producer) => {
      for (const chunk of chunks(RUNS, CHUNK)) await Promise.all(chunk.map((i) => producer.start(tenStepWorkflow, { i })));
    },
    async (producer) => {
      await waitUntil(`${RUNS} succeeded runs`, async () => (await producer.countRuns({ status: 'succeeded' })) >= RUNS);
      const [sample] = await producer.listRuns({ status: 'succeeded', limit: 1 });
      const input = sample?.input as { i: number } | undefined;
      if (!input || sample.output !== 10 * input.i + 45) throw new Error(`ours: a ten-step run has an unexpected output: ${JSON.stringify(sample?.output)}.`);
    },
  );
  return rate;
}

/** RUNS one-step runs with priorities, or under a concurrency key, queued first, then processed: runs/s. */
async function oursQueueKind(url: string, admin: Admin, prefix: string, kind: 'priority' | 'keyed'): Promise<{ rate: number; cost: RunCost }> {
  return oursQueuedFirst(
    url,
    admin,
    prefix,
    async (producer) => {
      for (const chunk of chunks(RUNS, CHUNK)) {
        await Promise.all(
          chunk.map((i) => (kind === 'priority' ? producer.start(prioWorkflow, { i }, { priority: 1 + (i % 3) }) : producer.start(keyedWorkflow, { i }))),
        );
      }
    },
    async (producer) => {
      await waitUntil(`${RUNS} succeeded runs`, async () => (await producer.countRuns({ status: 'succeeded' })) >= RUNS);
      if (await producer.countRuns({ status: 'queued' })) throw new Error(`ours: ${kind} runs are left queued.`);
    },
  );
}

/** RUNS runs of 1 KiB payloads, queued first, then processed: runs/s (the codec figures). */
async function oursKib(url: string, admin: Admin, prefix: string): Promise<{ rate: number; nodeUs: number }> {
  const { rate, cost } = await oursQueuedFirst(
    url,
    admin,
    prefix,
    async (producer) => {
      for (const chunk of chunks(RUNS, CHUNK)) await Promise.all(chunk.map((i) => producer.start(kibWorkflow, { i, blob: KIB })));
    },
    async (producer) => {
      await waitUntil(`${RUNS} succeeded runs`, async () => (await producer.countRuns({ status: 'succeeded' })) >= RUNS);
      const [sample] = await producer.listRuns({ status: 'succeeded', limit: 1 });
      if ((sample?.output as { blob?: string } | undefined)?.blob !== KIB) throw new Error('ours: a 1 KiB run has an unexpected output.');
    },
  );
  return { rate, nodeUs: cost.nodeUs };
}

async function oursEndToEnd(url: string, admin: Admin, prefix: string): Promise<{ rate: number; bytesPerRun: number }> {
  await admin.flushAll();
  const setup = await oursWorker(url, prefix, CONCURRENCY);
  try {
    await sleep(100); // let the worker go idle (blocked on its ready list)
    const before = await admin.usedMemory();
    const counter = new Counter(RUNS);
    hooks.done = () => counter.hit();
    const t0 = performance.now();
    await oursEnqueueAll(setup.producer, RUNS);
    await withTimeout('ours end to end', counter.done);
    await oursConfirm(setup.producer, RUNS);
    const rate = RUNS / ((performance.now() - t0) / 1000);
    const after = await admin.usedMemory();
    return { rate, bytesPerRun: (after - before) / RUNS };
  } finally {
    hooks.done = () => undefined;
    await setup.stop();
  }
}

async function oursPickup(url: string, admin: Admin, prefix: string): Promise<number[]> {
  await admin.flushAll();
  const setup = await oursWorker(url, prefix, 1);
  const samples: number[] = [];
  try {
    await sleep(100);
    for (let k = 0; k < WARMUP + PICKUP; k++) {
      const started = new Promise<number>((resolve) => (hooks.started = () => resolve(performance.now())));
      const t0 = performance.now();
      const handle = await setup.producer.start(benchWorkflow, { i: k });
      const t1 = await withTimeout('ours pickup', started);
      hooks.started = () => undefined;
      const runKey = setup.producer.keys.run(handle.id);
      await waitUntil(`run ${handle.id} to succeed`, async () => (await setup.producer.redis.hget(runKey, 'status')) === 'succeeded');
      if (k >= WARMUP) samples.push(t1 - t0);
      await sleep(3); // the worker goes back to its blocking wait
    }
    return samples;
  } finally {
    hooks.started = () => undefined;
    await setup.stop();
  }
}

async function runOurs(url: string, admin: Admin, round: number): Promise<Figures> {
  const processing = await oursProcessing(url, admin, `bench-ours-r${round}-proc`);
  const tenSteps = await oursTenSteps(url, admin, `bench-ours-r${round}-ten`);
  const e2e = await oursEndToEnd(url, admin, `bench-ours-r${round}-e2e`);
  const pickup = await oursPickup(url, admin, `bench-ours-r${round}-pick`);
  return figures(processing, tenSteps, e2e, pickup);
}

/** One round's figures of a system from its phases. */
function figures(processing: { rate: number; cost: RunCost }, tenSteps: number, e2e: { rate: number; bytesPerRun: number }, pickup: number[]): Figures {
  return {
    processing: processing.rate,
    tenSteps,
    ...processing.cost,
    endToEnd: e2e.rate,
    bytesPerRun: e2e.bytesPerRun,
    pickupP50: percentile(pickup, 50),
    pickupP99: percentile(pickup, 99),
  };
}

// ---------------------------------------------------------------------------------------------
// BullMQ

interface BullConnection {
  host: string;
  port: number;
  maxRetriesPerRequest: null;
}

function bullConnection(url: string): BullConnection {
  const parsed = new URL(url);
  return { host: parsed.hostname, port: Number(parsed.port), maxRetriesPerRequest: null };
}

const JOB_OPTS = { removeOnComplete: false, removeOnFail: false };

async function bullAddAll(queue: Queue, n: number): Promise<void> {
  for (const chunk of chunks(n, CHUNK)) await queue.addBulk(chunk.map((i) => ({ name: 'noop', data: { i }, opts: JOB_OPTS })));
}

async function bullConfirm(queue: Queue, n: number): Promise<void> {
  await waitUntil(`${n} completed jobs`, async () => (await queue.getCompletedCount()) >= n);
  const counts = await queue.getJobCounts('completed', 'failed', 'active', 'wait');
  if (counts.completed !== n || counts.failed || counts.active || counts.wait) {
    throw new Error(`bullmq: expected ${n} completed jobs, got ${JSON.stringify(counts)}.`);
  }
}

async function bullProcessing(url: string, admin: Admin, name: string): Promise<{ rate: number; cost: RunCost }> {
  await admin.flushAll();
  const connection = bullConnection(url);
  const queue = new Queue(name, { connection });
  let worker: BullWorker | undefined;
  try {
    await queue.waitUntilReady();
    const s0 = await snapshot(admin.redis);
    await bullAddAll(queue, RUNS);
    const counter = new Counter(RUNS);
    const t0 = performance.now();
    worker = new BullWorker(name, async () => counter.hit(), { connection, concurrency: CONCURRENCY });
    await withTimeout('bullmq processing', counter.done);
    const rate = RUNS / ((performance.now() - t0) / 1000);
    // The handler of the last jobs returned; their moveToFinished may still be on the wire.
    await waitUntil(`${RUNS} completed jobs`, async () => (await queue.getCompletedCount()) >= RUNS);
    const cost = totalCost(s0, await snapshot(admin.redis), RUNS);
    await bullConfirm(queue, RUNS);
    return { rate, cost };
  } finally {
    await worker?.close();
    await queue.close();
  }
}

async function bullTenSteps(url: string, admin: Admin, name: string): Promise<number> {
  await admin.flushAll();
  const connection = bullConnection(url);
  const queue = new Queue(name, { connection });
  let worker: BullWorker | undefined;
  try {
    await queue.waitUntilReady();
    await bullAddAll(queue, RUNS);
    const counter = new Counter(RUNS);
    const t0 = performance.now();
    worker = new BullWorker(
      name,
      async (job) => {
        for (let s = 0; s < 10; s++) await job.updateData({ ...job.data, [`s${s}`]: s });
        counter.hit();
      },
      { connection, concurrency: CONCURRENCY },
    );
    await withTimeout('bullmq ten steps', counter.done);
    const rate = RUNS / ((performance.now() - t0) / 1000);
    await bullConfirm(queue, RUNS);
    return rate;
  } finally {
    await worker?.close();
    await queue.close();
  }
}

async function bullEndToEnd(url: string, admin: Admin, name: string): Promise<{ rate: number; bytesPerRun: number }> {
  await admin.flushAll();
  const connection = bullConnection(url);
  const queue = new Queue(name, { connection });
  let counter: Counter | undefined;
  const worker = new BullWorker(name, async () => counter?.hit(), { connection, concurrency: CONCURRENCY });
  try {
    await Promise.all([queue.waitUntilReady(), worker.waitUntilReady()]);
    await sleep(100);
    const before = await admin.usedMemory();
    const current = (counter = new Counter(RUNS));
    const t0 = performance.now();
    await bullAddAll(queue, RUNS);
    await withTimeout('bullmq end to end', current.done);
    await bullConfirm(queue, RUNS);
    const rate = RUNS / ((performance.now() - t0) / 1000);
    const after = await admin.usedMemory();
    return { rate, bytesPerRun: (after - before) / RUNS };
  } finally {
    await worker.close();
    await queue.close();
  }
}

async function bullPickup(url: string, admin: Admin, name: string): Promise<number[]> {
  await admin.flushAll();
  const connection = bullConnection(url);
  const queue = new Queue(name, { connection });
  let started: (() => void) | undefined;
  let completed: (() => void) | undefined;
  const worker = new BullWorker(name, async () => started?.(), { connection, concurrency: 1 });
  worker.on('completed', () => completed?.());
  const samples: number[] = [];
  try {
    await Promise.all([queue.waitUntilReady(), worker.waitUntilReady()]);
    await sleep(100);
    for (let k = 0; k < WARMUP + PICKUP; k++) {
      const startedAt = new Promise<number>((resolve) => (started = () => resolve(performance.now())));
      const done = new Promise<void>((resolve) => (completed = resolve));
      const t0 = performance.now();
      await queue.add('noop', { i: k }, JOB_OPTS);
      const t1 = await withTimeout('bullmq pickup', startedAt);
      await withTimeout('bullmq pickup completion', done);
      if (k >= WARMUP) samples.push(t1 - t0);
      await sleep(3);
    }
    return samples;
  } finally {
    await worker.close();
    await queue.close();
  }
}

async function runBull(url: string, admin: Admin, round: number): Promise<Figures> {
  const processing = await bullProcessing(url, admin, `bench-bull-r${round}-proc`);
  const tenSteps = await bullTenSteps(url, admin, `bench-bull-r${round}-ten`);
  const e2e = await bullEndToEnd(url, admin, `bench-bull-r${round}-e2e`);
  const pickup = await bullPickup(url, admin, `bench-bull-r${round}-pick`);
  return figures(processing, tenSteps, e2e, pickup);
}

// ---------------------------------------------------------------------------------------------
// Report

const ROWS: { key: keyof Figures; label: string; unit: string; digits: number; throughput: boolean }[] = [
  { key: 'processing', label: `processing (${RUNS} queued, then worker, C=${CONCURRENCY})`, unit: 'runs/s', digits: 0, throughput: true },
  { key: 'tenSteps', label: `10 steps per run vs 10 updateData per job (${RUNS} queued, C=${CONCURRENCY})`, unit: 'runs/s', digits: 0, throughput: true },
  { key: 'endToEnd', label: `end to end (worker idle, enqueue ${RUNS}, C=${CONCURRENCY})`, unit: 'runs/s', digits: 0, throughput: true },
  { key: 'pickupP50', label: 'idle pickup p50 (enqueue → handler start)', unit: 'ms', digits: 2, throughput: false },
  { key: 'pickupP99', label: 'idle pickup p99 (enqueue → handler start)', unit: 'ms', digits: 2, throughput: false },
  { key: 'bytesPerRun', label: 'Redis memory per finished run / completed job', unit: 'B', digits: 0, throughput: false },
  { key: 'redisUs', label: 'Redis CPU per run / job (enqueue + processing)', unit: 'µs', digits: 1, throughput: false },
  { key: 'commands', label: 'Redis commands per run / job (inside scripts too)', unit: 'cmds', digits: 1, throughput: false },
  { key: 'nodeUs', label: 'Node CPU per run / job (producer + worker, one process)', unit: 'µs', digits: 1, throughput: false },
];

function loadLine(): string {
  return loadavg()
    .map((l) => l.toFixed(2))
    .join(' / ');
}

function fmt(value: number, digits: number): string {
  return value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function report(results: Record<System, Figures[]>, env: string[]): void {
  console.log('');
  for (const line of env) console.log(line);
  console.log('');
  console.log(`Median of ${ROUNDS} round(s); ratio = nestjs-redflow / BullMQ (throughput: higher is better; latency and memory: lower is better).`);
  console.log('');
  console.log('| figure | nestjs-redflow | BullMQ | ratio |');
  console.log('| --- | ---: | ---: | ---: |');
  for (const row of ROWS) {
    const ours = median(results.ours.map((f) => f[row.key]));
    const bull = median(results.bullmq.map((f) => f[row.key]));
    const ratio = bull === 0 ? 'n/a' : `${(ours / bull).toFixed(2)}×`;
    console.log(`| ${row.label} | ${fmt(ours, row.digits)} ${row.unit} | ${fmt(bull, row.digits)} ${row.unit} | ${ratio} |`);
  }
  console.log('');
  console.log('Raw figures per round:');
  console.log('');
  console.log(`| round | system | ${ROWS.map((r) => `${r.key} (${r.unit})`).join(' | ')} |`);
  console.log(`| --- | --- | ${ROWS.map(() => '---:').join(' | ')} |`);
  for (let r = 0; r < ROUNDS; r++) {
    for (const system of ['ours', 'bullmq'] as const) {
      const f = results[system][r];
      const name = system === 'ours' ? 'nestjs-redflow' : 'BullMQ';
      console.log(`| ${r + 1} | ${name} | ${ROWS.map((row) => fmt(f[row.key], row.digits)).join(' | ')} |`);
    }
  }
  console.log('');
}

// ---------------------------------------------------------------------------------------------

type QueueKind = 'plain' | 'priority' | 'keyed';
type QueueKindFigures = Record<QueueKind, { rate: number; cost: RunCost }>;

/** The processing workload on a plain queue, with priorities and under concurrency keys, back to back (the order turns each round). */
async function measureQueueKinds(url: string, admin: Admin, round: number): Promise<QueueKindFigures> {
  const measure: Record<QueueKind, () => Promise<{ rate: number; cost: RunCost }>> = {
    plain: () => oursProcessing(url, admin, `bench-plain-r${round}`),
    priority: () => oursQueueKind(url, admin, `bench-prio-r${round}`, 'priority'),
    keyed: () => oursQueueKind(url, admin, `bench-keyed-r${round}`, 'keyed'),
  };
  const kinds: QueueKind[] = ['plain', 'priority', 'keyed'];
  const figures = {} as QueueKindFigures;
  for (const kind of kinds.map((_, i) => kinds[(i + round - 1) % kinds.length])) figures[kind] = await measure[kind]();
  const line = kinds.map(
    (k) => `${k} ${fmt(figures[k].rate, 0)}/s (Redis ${fmt(figures[k].cost.redisUs, 1)} µs, Node ${fmt(figures[k].cost.nodeUs, 1)} µs per run)`,
  );
  console.log(`round ${round} nestjs-redflow: ${line.join(', ')}`);
  return figures;
}

/** The queue figures: medians of the rates, of each round's ratio to the plain queue, and of the CPU per run. */
function reportQueueKinds(queueKinds: QueueKindFigures[]): void {
  console.log('nestjs-redflow processing (one-step runs queued first, then the worker) with priorities 1-3, and under a concurrency key (100 keys, limit 10):');
  console.log('');
  console.log("| queue | runs/s | / plain (median of the rounds' ratios) | Redis CPU per run | Node CPU per run | commands per run |");
  console.log('| --- | ---: | ---: | ---: | ---: | ---: |');
  for (const [label, key] of [
    ['plain', 'plain'],
    ['priorities 1-3', 'priority'],
    ['concurrency keys (100 keys, limit 10)', 'keyed'],
  ] as const) {
    const of = (f: (k: { rate: number; cost: RunCost }) => number) => median(queueKinds.map((k) => f(k[key])));
    const ratio = median(queueKinds.map((f) => f[key].rate / f.plain.rate));
    console.log(
      `| ${label} | ${fmt(
        of((k) => k.rate),
        0,
      )} | ${ratio.toFixed(2)}× | ${fmt(
        of((k) => k.cost.redisUs),
        1,
      )} µs | ${fmt(
        of((k) => k.cost.nodeUs),
        1,
      )} µs | ${fmt(
        of((k) => k.cost.commands),
        1,
      )} |`,
    );
  }
  console.log('');
}

async function main(): Promise<number> {
  if (!redisServers.hasRedisServer()) {
    console.error(redisServers.NO_REDIS);
    return 1;
  }
  const wallStart = performance.now();
  const servers = await redisServers.startStandalone();
  let admin: Admin | undefined;
  try {
    admin = new Admin(servers.url);
    // BENCH_FSYNC=always: both systems on a Redis that fsyncs its append-only file before each reply.
    if (FSYNC) {
      await admin.redis.config('SET', 'appendonly', 'yes');
      await admin.redis.config('SET', 'appendfsync', FSYNC);
    }
    const cpu = cpus();
    const env = [
      `node ${process.version} (${process.platform}/${process.arch}), ${cpu.length} CPU(s): ${cpu[0]?.model.trim() ?? 'unknown'}`,
      `redis-server ${await admin.serverVersion()} (${execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).trim()})`,
      `bullmq ${(require('bullmq/package.json') as { version: string }).version}, ioredis ${(require('ioredis/package.json') as { version: string }).version}`,
      `runs per figure ${RUNS}, rounds ${ROUNDS}, pickup samples ${PICKUP} (+${WARMUP} warm-up), chunk ${CHUNK}`,
      `persistence: ${FSYNC ? `appendonly yes, appendfsync ${FSYNC}` : 'none (no RDB, no AOF)'}`,
      `load average at start ${loadLine()}`,
    ];
    for (const line of env) console.log(line);
    const results: Record<System, Figures[]> = { ours: [], bullmq: [] };
    const streamOff: { processing: number; endToEnd: number }[] = [];
    const tracingOn: { processing: number; endToEnd: number }[] = [];
    const codecFigures: { plain: number; aes: number; plainNodeUs: number; aesNodeUs: number }[] = [];
    const queueKinds: QueueKindFigures[] = [];
    for (let round = 1; round <= ROUNDS && ONLY_QUEUES; round++) queueKinds.push(await measureQueueKinds(servers.url, admin, round));
    for (let round = 1; round <= ROUNDS && !ONLY_QUEUES; round++) {
      const t = performance.now();
      const ours = await runOurs(servers.url, admin, round);
      results.ours.push(ours);
      console.log(
        `round ${round} nestjs-redflow: processing ${fmt(ours.processing, 0)}/s, e2e ${fmt(ours.endToEnd, 0)}/s, pickup p50 ${fmt(ours.pickupP50, 2)} ms p99 ${fmt(ours.pickupP99, 2)} ms, ${fmt(ours.bytesPerRun, 0)} B/run (${((performance.now() - t) / 1000).toFixed(1)} s)`,
      );
      // The same workload with the event stream off (events: false), on the same Redis.
      oursEvents = false;
      try {
        const off = {
          processing: (await oursProcessing(servers.url, admin, `bench-off-r${round}-proc`)).rate,
          endToEnd: (await oursEndToEnd(servers.url, admin, `bench-off-r${round}-e2e`)).rate,
        };
        streamOff.push(off);
        console.log(`round ${round} nestjs-redflow, event stream off: processing ${fmt(off.processing, 0)}/s, e2e ${fmt(off.endToEnd, 0)}/s`);
      } finally {
        oursEvents = undefined;
      }
      // The same workload with tracing on and no OpenTelemetry SDK registered (the API's no-op tracer).
      oursTracing = redflowTracing();
      try {
        const on = {
          processing: (await oursProcessing(servers.url, admin, `bench-otel-r${round}-proc`)).rate,
          endToEnd: (await oursEndToEnd(servers.url, admin, `bench-otel-r${round}-e2e`)).rate,
        };
        tracingOn.push(on);
        console.log(`round ${round} nestjs-redflow, tracing on (no SDK): processing ${fmt(on.processing, 0)}/s, e2e ${fmt(on.endToEnd, 0)}/s`);
      } finally {
        oursTracing = undefined;
      }
      queueKinds.push(await measureQueueKinds(servers.url, admin, round));
      // 1 KiB payloads without a codec and with AES-256-GCM.
      const plain = await oursKib(servers.url, admin, `bench-kib-r${round}-plain`);
      oursCodec = aesGcmCodec({ keys: { bench: Buffer.alloc(32, 1) }, current: 'bench' });
      try {
        const aes = await oursKib(servers.url, admin, `bench-kib-r${round}-aes`);
        codecFigures.push({ plain: plain.rate, aes: aes.rate, plainNodeUs: plain.nodeUs, aesNodeUs: aes.nodeUs });
        console.log(
          `round ${round} nestjs-redflow, 1 KiB payloads: ${fmt(plain.rate, 0)}/s (${fmt(plain.nodeUs, 1)} µs Node CPU/run) without a codec, ${fmt(aes.rate, 0)}/s (${fmt(aes.nodeUs, 1)} µs) with aesGcmCodec`,
        );
      } finally {
        oursCodec = undefined;
      }
      const tb = performance.now();
      const bull = await runBull(servers.url, admin, round);
      results.bullmq.push(bull);
      console.log(
        `round ${round} BullMQ:         processing ${fmt(bull.processing, 0)}/s, e2e ${fmt(bull.endToEnd, 0)}/s, pickup p50 ${fmt(bull.pickupP50, 2)} ms p99 ${fmt(bull.pickupP99, 2)} ms, ${fmt(bull.bytesPerRun, 0)} B/job (${((performance.now() - tb) / 1000).toFixed(1)} s)`,
      );
    }
    env.push(`load average at end ${loadLine()} (other processes on this machine skew the figures)`);
    if (ONLY_QUEUES) {
      reportQueueKinds(queueKinds);
      return 0;
    }
    report(results, env);
    console.log('nestjs-redflow with the event stream on (default, MAXLEN ~ 100000) and off (events: false):');
    console.log('');
    console.log('| figure | stream on | stream off | on / off |');
    console.log('| --- | ---: | ---: | ---: |');
    for (const key of ['processing', 'endToEnd'] as const) {
      const on = median(results.ours.map((f) => f[key]));
      const off = median(streamOff.map((f) => f[key]));
      console.log(`| ${ROWS.find((r) => r.key === key)!.label} | ${fmt(on, 0)} runs/s | ${fmt(off, 0)} runs/s | ${(on / off).toFixed(2)}× |`);
    }
    console.log('');
    console.log('nestjs-redflow with tracing off (default) and on with no OpenTelemetry SDK registered (tracing: redflowTracing()):');
    console.log('');
    console.log('| figure | tracing off | tracing on, no SDK | on / off |');
    console.log('| --- | ---: | ---: | ---: |');
    for (const key of ['processing', 'endToEnd'] as const) {
      const off = median(results.ours.map((f) => f[key]));
      const on = median(tracingOn.map((f) => f[key]));
      console.log(`| ${ROWS.find((r) => r.key === key)!.label} | ${fmt(off, 0)} runs/s | ${fmt(on, 0)} runs/s | ${(on / off).toFixed(2)}× |`);
    }
    console.log('');
    console.log('nestjs-redflow with 1 KiB payloads (input, a step output, the output), without a codec and with aesGcmCodec (AES-256-GCM):');
    console.log('');
    console.log('| figure | no codec | aesGcmCodec | aes / none |');
    console.log('| --- | ---: | ---: | ---: |');
    for (const [label, plainKey, aesKey, unit, digits] of [
      [`1 KiB payloads (${RUNS} queued, then worker, C=${CONCURRENCY})`, 'plain', 'aes', 'runs/s', 0],
      ['Node CPU per run (producer + worker, one process)', 'plainNodeUs', 'aesNodeUs', 'µs', 1],
    ] as const) {
      const none = median(codecFigures.map((f) => f[plainKey]));
      const aes = median(codecFigures.map((f) => f[aesKey]));
      console.log(`| ${label} | ${fmt(none, digits)} ${unit} | ${fmt(aes, digits)} ${unit} | ${(aes / none).toFixed(2)}× |`);
    }
    console.log('');
    reportQueueKinds(queueKinds);
    console.log(`Total wall time: ${((performance.now() - wallStart) / 1000).toFixed(1)} s`);
    return 0;
  } catch (error) {
    console.error('Benchmark failed:', error);
    return 1;
  } finally {
    if (admin) admin.redis.disconnect();
    await redisServers.stopServers(servers);
  }
}

runMain(main);
