/**
 * Benchmark: listing the runs of one workflow filtered by status, at 100,000 runs.
 *
 *   npm run bench:list                                      # defaults below
 *   BENCH_LIST_RUNS=20000 BENCH_LIST_PAYLOAD_BYTES=65536 npm run bench:list
 *
 * On its own redis-server (free port, no persistence), it stores BENCH_LIST_RUNS runs of one
 * workflow across every status, then times page reads of 50 runs, one request at a time:
 *   - listRunSummaries({ workflow, status, limit: 50, offset }): the (workflow, status) index, then
 *     the summary fields of 50 runs;
 *   - listRuns with the same options: the same index, then 50 whole runs (input, output, error);
 *   - the listing as it was before the (workflow, status) index: the workflow's runs index scanned
 *     newest first, 200 whole runs per round trip, filtered by status (fewer requests: it is slow).
 * Requests cycle through the statuses and through offsets from the first page to deep ones.
 *
 * The runs are written directly with pipelines (one hash per run and every index entry the engine
 * keeps for it), not through the scripts, so that 100,000 runs take seconds. Before timing, the
 * bench creates one run per status through the real scripts on a scratch prefix and checks that
 * the synthetic runs have the same hash fields and the same index entries, and it checks that
 * each index holds the expected number of runs.
 */
import { execFileSync } from 'node:child_process';
import { cpus, loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';

import { createAdmin, createClient, WorkflowRegistry, type RunStatus, type WorkflowClient } from '../lib';
import { CanceledError } from '../lib/core/errors';
import { serializeError } from '../lib/core/store/serialization';
import { envInt, redisServers, runMain } from './bench-support';

const RUNS = envInt('BENCH_LIST_RUNS', 100_000);
const REQUESTS = envInt('BENCH_LIST_REQUESTS', 200);
const OLD_REQUESTS = envInt('BENCH_LIST_OLD_REQUESTS', 24);
/** Size of each run's input, and of each succeeded run's output and step output. */
const PAYLOAD_BYTES = envInt('BENCH_LIST_PAYLOAD_BYTES', 1024);
const PAGE = 50;
const WARMUP = 10;
const WRITE_CHUNK = 1000;
const PREFIX = 'bench-list';
const WORKFLOW = 'report';
const QUEUE = 'default';
const LEASE_MS = 600_000;

/** Share of the runs in each status (sums to 1). */
const MIX: Array<[RunStatus, number]> = [
  ['succeeded', 0.7],
  ['failed', 0.1],
  ['queued', 0.08],
  ['scheduled', 0.05],
  ['canceled', 0.05],
  ['running', 0.02],
];
const ENDED = new Set<RunStatus>(['succeeded', 'failed', 'canceled']);
const OFFSETS = [0, 50, 500, 1_000, 1_950, 4_950, 20_000, 60_000];

/** Nearest-rank percentile. */
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

const fmt = (value: number, digits = 1) => value.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });

// ---------------------------------------------------------------------------------------------
// Runs written directly, in the shape the scripts write them

interface SyntheticRun {
  id: string;
  status: RunStatus;
  createdAt: number;
  /** Hash fields, flat. */
  fields: string[];
  finishedAt?: number;
  dueAt?: number;
}

const payload = (i: number) => ({ i, text: 'x'.repeat(Math.max(0, PAYLOAD_BYTES - 20)) });

/**
 * One run of `status`, as enqueue, claim, finish and cancel leave it (see docs/engine.md, Keys).
 * `i` makes times and ids distinct; `now` is the time the bench started.
 */
function syntheticRun(i: number, status: RunStatus, now: number): SyntheticRun {
  const id = `run${String(i).padStart(8, '0')}`;
  const createdAt = now - 10 * (RUNS - i);
  const startedAt = createdAt + 2;
  const finishedAt = createdAt + 5;
  const input = JSON.stringify(payload(i));
  const fields = ['workflow', WORKFLOW, 'queue', QUEUE, 'status', status, 'input', input, 'maxAttempts', '3', 'createdAt', String(createdAt)];
  const run: SyntheticRun = { id, status, createdAt, fields };
  const started = ['startedAt', String(startedAt)];
  switch (status) {
    case 'queued':
      fields.push('attempt', '0', 'availableAt', String(createdAt));
      break;
    case 'scheduled':
      run.dueAt = now + 3_600_000 + i;
      fields.push('attempt', '0', 'availableAt', String(run.dueAt));
      break;
    case 'running':
      fields.push('attempt', '1', 'availableAt', String(createdAt), ...started, 'lease', `bench:${i}:1`);
      break;
    case 'succeeded': {
      const output = JSON.stringify(payload(i));
      fields.push('attempt', '1', 'availableAt', String(createdAt), ...started, 'output', output, 'finishedAt', String(finishedAt));
      fields.push('s:work', JSON.stringify([1, 1, 1, finishedAt, 3, payload(i)]));
      run.finishedAt = finishedAt;
      break;
    }
    case 'failed': {
      const error = serializeError(Object.assign(new Error(`Report ${i} failed: the upstream service answered 503 after 30 s.`), { name: 'UpstreamError' }));
      fields.push('attempt', '3', 'availableAt', String(createdAt), ...started, 'error', error, 'finishedAt', String(finishedAt));
      fields.push('s:work', JSON.stringify([0, 1, 3, finishedAt, 3, JSON.parse(error)]));
      run.finishedAt = finishedAt;
      break;
    }
    case 'canceled':
      fields.push(
        'attempt',
        '0',
        'availableAt',
        String(createdAt),
        'error',
        serializeError(new CanceledError(id, 'bench')),
        'cancelReason',
        'bench',
        'finishedAt',
        String(finishedAt),
      );
      run.finishedAt = finishedAt;
      break;
  }
  return run;
}

/** The workflow's runs by creation time, as engines before the (workflow, status) index kept them: read by `listByScan` only. */
function oldRunsIndex(client: WorkflowClient): string {
  return `${client.keys.base}bench:old-runs:${WORKFLOW}`;
}

/** Writes a run and every index entry the engine keeps for it into a pipeline. */
function writeRun(pipeline: ReturnType<Redis['pipeline']>, client: WorkflowClient, run: SyntheticRun, now: number): void {
  const k = client.keys;
  pipeline.hset(k.run(run.id), ...run.fields);
  // What the listing before the (workflow, status) index scanned, kept apart for that comparison.
  pipeline.zadd(oldRunsIndex(client), run.createdAt, run.id);
  pipeline.sadd(k.workflowNames(), WORKFLOW);
  const score = ENDED.has(run.status) ? run.finishedAt! : run.createdAt;
  if (run.status === 'running') pipeline.zadd(k.leases(), now + LEASE_MS, run.id);
  else if (ENDED.has(run.status)) pipeline.zadd(k.status(run.status), score, run.id);
  pipeline.zadd(k.workflowStatusRuns(run.status, WORKFLOW), score, run.id);
  if (run.status === 'queued') pipeline.rpush(k.ready(QUEUE), run.id);
  if (run.status === 'scheduled') pipeline.zadd(k.scheduled(QUEUE), run.dueAt!, run.id);
}

/** The status of run `i`: the mix, spread evenly over creation time. */
function statusOf(i: number): RunStatus {
  const x = (i * 0.6180339887) % 1;
  let sum = 0;
  for (const [status, share] of MIX) {
    sum += share;
    if (x < sum) return status;
  }
  return MIX[0][0];
}

async function storeRuns(client: WorkflowClient, now: number): Promise<Record<RunStatus, number>> {
  const counts = Object.fromEntries(MIX.map(([s]) => [s, 0])) as Record<RunStatus, number>;
  for (let start = 0; start < RUNS; start += WRITE_CHUNK) {
    const pipeline = client.redis.pipeline();
    for (let i = start; i < Math.min(RUNS, start + WRITE_CHUNK); i++) {
      const run = syntheticRun(i, statusOf(i), now);
      counts[run.status]++;
      writeRun(pipeline, client, run, now);
    }
    for (const [error] of (await pipeline.exec()) ?? []) if (error) throw error;
  }
  // The index covers every run: a worker started on this prefix backfills nothing.
  await client.redis.set(client.keys.workflowStatusIndexMarker(), '2');
  return counts;
}

/** Hash fields and index keys of a run, with the prefix and ids taken out, to compare shapes. */
async function shapeOf(client: WorkflowClient, id: string): Promise<{ fields: string[]; indexes: string[] }> {
  const k = client.keys;
  const fields = Object.keys(await client.redis.hgetall(k.run(id))).sort();
  const indexes: string[] = [];
  const zsets = [k.leases(), k.scheduled(QUEUE), ...MIX.flatMap(([s]) => [k.status(s), k.workflowStatusRuns(s, WORKFLOW)])];
  for (const key of zsets) if ((await client.redis.zscore(key, id)) !== null) indexes.push(key.slice(k.base.length));
  if ((await client.redis.lpos(k.ready(QUEUE), id)) !== null) indexes.push(k.ready(QUEUE).slice(k.base.length));
  return { fields, indexes: indexes.sort() };
}

/** One run per status through the real scripts, compared with a synthetic run of that status. */
async function checkShapes(url: string, now: number): Promise<void> {
  const registry = new WorkflowRegistry();
  registry.define(WORKFLOW, { maxAttempts: 3, maxConcurrency: Infinity }, () => 1);
  const engine = createClient({ url, prefix: `${PREFIX}-shape`, registry });
  const synthetic = createClient({ url, prefix: `${PREFIX}-shape-synthetic`, registry });
  try {
    const s = engine.scripts;
    const startRun = async (runAt?: number) => (await engine.runByName(WORKFLOW, payload(0), runAt ? { runAt } : {})).id;
    const claimRun = async (token: string) => (await s.claim(QUEUE, token, Date.now(), LEASE_MS))!.runId;
    const finishRun = (runId: string, token: string, outcome: 'succeeded' | 'failed', body: string, records: string[]) =>
      s.finish({ runId, queue: QUEUE, token, now: Date.now(), outcome, payload: body, dueAt: 0, nextToken: '', leaseMs: LEASE_MS, waitFields: [], records });
    const made: Partial<Record<RunStatus, string>> = {};
    made.succeeded = await startRun();
    made.failed = await startRun();
    made.running = await startRun();
    await claimRun('t1');
    await finishRun(made.succeeded, 't1', 'succeeded', JSON.stringify(payload(0)), ['s:work', '[1,1,1,0,3,{}]']);
    await claimRun('t2');
    await finishRun(made.failed, 't2', 'failed', serializeError(new Error('x')), ['s:work', '[0,1,1,0,3,{}]']);
    await claimRun('t3');
    made.canceled = await startRun();
    await engine.cancelRun(made.canceled, { reason: 'bench' });
    // The next claim drops the canceled run's id from the ready list (the engine drops it lazily).
    if (await s.claim(QUEUE, 't4', Date.now(), LEASE_MS)) throw new Error('The shape check claimed a run it did not expect.');
    made.queued = await startRun();
    made.scheduled = await startRun(Date.now() + 3_600_000);
    for (const [j, [status]] of MIX.entries()) {
      const run = syntheticRun(j, status, now);
      const pipeline = synthetic.redis.pipeline();
      writeRun(pipeline, synthetic, run, now);
      await pipeline.exec();
      const real = await shapeOf(engine, made[status]!);
      const ours = await shapeOf(synthetic, run.id);
      if (JSON.stringify(real) !== JSON.stringify(ours)) {
        throw new Error(`The synthetic ${status} run differs from one the scripts write: engine ${JSON.stringify(real)}, synthetic ${JSON.stringify(ours)}.`);
      }
    }
  } finally {
    await createAdmin(engine).resetState();
    await createAdmin(synthetic).resetState();
    await Promise.allSettled([engine.close(), synthetic.close()]);
  }
}

// ---------------------------------------------------------------------------------------------
// Listing as it was before the (workflow, status) index (client.ts before this index), for comparison

const RUN_FIELDS = [
  'workflow',
  'queue',
  'status',
  'input',
  'output',
  'error',
  'attempt',
  'maxAttempts',
  'createdAt',
  'availableAt',
  'startedAt',
  'finishedAt',
  'cancelReason',
  'idempotencyKey',
  'parent',
];

async function listByScan(client: WorkflowClient, status: RunStatus, limit: number, offset: number): Promise<unknown[]> {
  const index = oldRunsIndex(client);
  const out: unknown[] = [];
  let skipped = 0;
  const page = 200;
  for (let start = 0; out.length < limit; start += page) {
    const ids = await client.redis.zrevrange(index, start, start + page - 1);
    const pipeline = client.redis.pipeline();
    for (const id of ids) pipeline.hmget(client.keys.run(id), ...RUN_FIELDS);
    for (const [, values] of (await pipeline.exec()) ?? []) {
      const v = values as (string | null)[];
      if (v[2] !== status) continue;
      if (skipped++ < offset) continue;
      // The old reader decoded input, output and error of every listed run.
      out.push({ status: v[2], input: JSON.parse(v[3] ?? 'null'), output: v[4] ? JSON.parse(v[4]) : undefined, error: v[5] ? JSON.parse(v[5]) : undefined });
      if (out.length === limit) break;
    }
    if (ids.length < page) break;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

interface Figure {
  label: string;
  requests: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  rows: number;
  bytes: number;
}

/** The requests: statuses in turn, offsets from the first page to deep ones (within each status's count). */
function requestPlan(counts: Record<RunStatus, number>, n: number): Array<{ status: RunStatus; offset: number }> {
  const plan: Array<{ status: RunStatus; offset: number }> = [];
  // A status with fewer runs than a page (at small BENCH_LIST_RUNS) is left out.
  if (!MIX.some(([status]) => counts[status] >= PAGE)) throw new Error(`No status has a full page of ${PAGE} runs: raise BENCH_LIST_RUNS.`);
  for (let i = 0; plan.length < n; i++) {
    const [status] = MIX[i % MIX.length];
    const candidates = OFFSETS.filter((o) => o + PAGE <= counts[status]);
    if (candidates.length) plan.push({ status, offset: candidates[Math.floor(i / MIX.length) % candidates.length] });
  }
  return plan;
}

async function measure(
  label: string,
  plan: Array<{ status: RunStatus; offset: number }>,
  warmup: number,
  read: (status: RunStatus, offset: number) => Promise<unknown[]>,
): Promise<Figure> {
  for (const { status, offset } of plan.slice(0, warmup)) await read(status, offset);
  const times: number[] = [];
  let rows = 0;
  let bytes = 0;
  for (const { status, offset } of plan) {
    const t0 = performance.now();
    const page = await read(status, offset);
    times.push(performance.now() - t0);
    if (page.length !== PAGE) throw new Error(`${label}: a page of ${status} at offset ${offset} has ${page.length} runs, expected ${PAGE}.`);
    rows += page.length;
    bytes += Buffer.byteLength(JSON.stringify(page));
  }
  return {
    label,
    requests: plan.length,
    p50: percentile(times, 50),
    p95: percentile(times, 95),
    p99: percentile(times, 99),
    max: Math.max(...times),
    rows,
    bytes: bytes / plan.length,
  };
}

async function main(): Promise<number> {
  if (!redisServers.hasRedisServer()) {
    console.error(redisServers.NO_REDIS);
    return 1;
  }
  const servers = await redisServers.startStandalone();
  const client = createClient({ url: servers.url, prefix: PREFIX, registry: new WorkflowRegistry() });
  try {
    const cpu = cpus();
    console.log(`node ${process.version} (${process.platform}/${process.arch}), ${cpu.length} CPU(s): ${cpu[0]?.model.trim() ?? 'unknown'}`);
    console.log(`${execFileSync('redis-server', ['--version'], { encoding: 'utf8' }).trim()}`);
    console.log(
      `load average at start ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' / ')}`,
    );
    const now = Date.now();
    await checkShapes(servers.url, now);
    let t = performance.now();
    const counts = await storeRuns(client, now);
    console.log(
      `stored ${RUNS} runs of "${WORKFLOW}" (${MIX.map(([s]) => `${s} ${counts[s]}`).join(', ')}), ${PAYLOAD_BYTES} B input and output, in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
    for (const [status] of MIX) {
      const indexed = await client.redis.zcard(client.keys.workflowStatusRuns(status, WORKFLOW));
      if (indexed !== counts[status]) throw new Error(`The ${status} index of "${WORKFLOW}" holds ${indexed} runs, expected ${counts[status]}.`);
    }
    const info = await client.redis.info('memory');
    console.log(`redis used_memory ${fmt(Number(/^used_memory:(\d+)/m.exec(info)?.[1] ?? 0) / 1024 / 1024)} MiB`);

    const plan = requestPlan(counts, REQUESTS);
    const figures: Figure[] = [];
    t = performance.now();
    // The slow path gets an even sample of the same requests, and two warm-up requests.
    const sample = plan.filter((_, i) => i % Math.ceil(plan.length / OLD_REQUESTS) === 0);
    figures.push(
      await measure('listRunSummaries({ workflow, status, limit: 50, offset })', plan, WARMUP, (status, offset) =>
        client.listRunSummaries({ workflow: WORKFLOW, status, limit: PAGE, offset }),
      ),
    );
    figures.push(
      await measure('listRuns({ workflow, status, limit: 50, offset })', plan, WARMUP, (status, offset) =>
        client.listRuns({ workflow: WORKFLOW, status, limit: PAGE, offset }),
      ),
    );
    figures.push(
      await measure('before the index: scan of wf:<workflow>:runs + filter', sample, 2, (status, offset) => listByScan(client, status, PAGE, offset)),
    );
    console.log(`measured in ${((performance.now() - t) / 1000).toFixed(1)} s`);

    console.log('');
    console.log(
      `Pages of ${PAGE} runs of one workflow filtered by status, at ${RUNS} runs; one request at a time; offsets ${OFFSETS.join(', ')} (those with a full page in the status), statuses in turn; warm-up requests not counted.`,
    );
    console.log('');
    console.log('| call | requests | p50 ms | p95 ms | p99 ms | max ms | JSON per page |');
    console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |');
    for (const f of figures) {
      console.log(`| ${f.label} | ${f.requests} | ${fmt(f.p50, 2)} | ${fmt(f.p95, 2)} | ${fmt(f.p99, 2)} | ${fmt(f.max, 2)} | ${fmt(f.bytes / 1024)} KiB |`);
    }
    console.log('');
    return 0;
  } finally {
    await client.close();
    await redisServers.stopServers(servers);
  }
}

runMain(main);
