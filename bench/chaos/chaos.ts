/**
 * Chaos test: a long randomized fault test of "a completed step never runs again and no run is lost".
 *
 *   npm run chaos                                   # 1000 runs, random seed (printed)
 *   CHAOS_RUNS=200 CHAOS_SEED=42 npm run chaos
 *
 * It starts its own redis-server (a free port, a private directory, AOF with `appendfsync always`
 * so a SIGKILL loses no acknowledged write), CHAOS_WORKERS worker processes (chaos-worker.ts,
 * concurrency CHAOS_CONCURRENCY, lease 1 s) serving a 3-step workflow, and enqueues CHAOS_RUNS runs
 * spread evenly over CHAOS_DURATION_MS. During that time it injects faults at random intervals
 * (CHAOS_FAULT_MIN_MS..CHAOS_FAULT_MAX_MS apart), the kinds drawn from shuffled rounds of the four:
 *   - worker kill:   SIGKILL a random worker process, start a replacement at once;
 *   - Redis restart: SIGKILL redis-server, wait 0-1 s, start it again on the same port and
 *                    directory (it reloads the AOF), wait until it answers PING;
 *   - full Redis:    CONFIG SET maxmemory <used_memory + 32 KiB> (policy noeviction) for 2-3 s,
 *                    then maxmemory 0;
 *   - blocked loop:  SIGUSR2 to a random ready worker, which busy-waits 1.5 x leaseDuration.
 * Then it waits until every run has ended, or until CHAOS_TIMEOUT_MS after the start, and prints
 * one table (see `report` for the exact meaning of each column). Every step body records each of
 * its executions in Redis before doing anything else (chaos-worker.ts `recordExecution`).
 *
 * Exit code 0 when no run was lost or stranded, no step body ran more than twice, every run was
 * enqueued and no succeeded run has a wrong output; else 1. The seed fixes the fault schedule
 * (kinds, targets, intervals), not the timing of the runs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

import { createClient, WorkflowRegistry, type WorkflowClient } from '../../lib';
import { envInt } from '../bench-support';
import {
  CHAOS_QUEUE,
  CHAOS_WORKFLOW,
  chaosRunOptions,
  chaosWorkflowOptions,
  execsKey,
  expectedOutput,
  FAST_RUNTIME,
  STEPS,
  type ChaosInput,
} from './chaos-shared';

// ---------------------------------------------------------------------------------------------
// Configuration

const RUNS = envInt('CHAOS_RUNS', 1000);
const WORKERS = envInt('CHAOS_WORKERS', 3);
const CONCURRENCY = envInt('CHAOS_CONCURRENCY', 8);
const DURATION_MS = envInt('CHAOS_DURATION_MS', RUNS * 60);
const TIMEOUT_MS = envInt('CHAOS_TIMEOUT_MS', 300_000);
const FAULT_MIN_MS = envInt('CHAOS_FAULT_MIN_MS', 500);
const FAULT_MAX_MS = Math.max(FAULT_MIN_MS, envInt('CHAOS_FAULT_MAX_MS', 3_000));
const STEP_MS = envInt('CHAOS_STEP_MS', 100, 0);
const MAX_ATTEMPTS = envInt('CHAOS_MAX_ATTEMPTS', 1);
const BLOCK_MS = Math.round(FAST_RUNTIME.leaseDuration * 1.5);
const SEED = envInt('CHAOS_SEED', Math.floor(Math.random() * 2 ** 31), 0);
const PREFIX = `chaos:${Date.now().toString(36)}${Math.floor(Math.random() * 1e9).toString(36)}`;
const WORKER_SCRIPT = join(__dirname, 'chaos-worker.ts');
const ROOT = join(__dirname, '..', '..');

/** mulberry32: a small seeded PRNG for the fault schedule. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const random = prng(SEED);
const between = (min: number, max: number) => min + Math.floor(random() * (max - min + 1));

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(1)} s`;
const log = (line: string) => console.log(`[${elapsed().padStart(7)}] ${line}`);

// ---------------------------------------------------------------------------------------------
// redis-server with AOF, restartable on the same port and directory

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/** True when a server on the port answers PING with PONG (not LOADING, not refused). */
function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let reply = '';
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.on('error', () => done(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (chunk) => {
      reply += chunk.toString();
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'));
    });
  });
}

class RedisServer {
  private proc: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();

  constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts redis-server (loading the AOF of the directory, if any) and waits until it answers PING. */
  async start(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'always'];
    args.push('--daemonize', 'no', '--dir', this.dir, '--logfile', join(this.dir, 'redis.log'));
    const proc = spawn('redis-server', args, { stdio: 'ignore' });
    this.proc = proc;
    this.exited = new Promise((resolve) => {
      proc.once('exit', () => resolve());
      proc.once('error', () => resolve());
    });
    const deadline = Date.now() + 30_000;
    while (!(await pings(this.port))) {
      if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`redis-server on port ${this.port} exited; see ${join(this.dir, 'redis.log')}.`);
      if (Date.now() > deadline) throw new Error(`redis-server on port ${this.port} did not answer PING within 30 s.`);
      await sleep(50);
    }
  }

  /** SIGKILLs the server and waits for it to exit. */
  async kill(): Promise<void> {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
    await this.exited;
  }

  /** For the process 'exit' handler: no waiting. */
  killNow(): void {
    if (this.proc && this.proc.exitCode === null && this.proc.signalCode === null) this.proc.kill('SIGKILL');
  }
}

// ---------------------------------------------------------------------------------------------
// Worker processes

interface WorkerChild {
  slot: number;
  proc: ChildProcess;
  ready: boolean;
  /** Set before we kill it, so its exit does not count as unexpected. */
  killedByUs: boolean;
  exited: Promise<void>;
}

/** Engine log lines of all workers (stack frames dropped), ids and numbers normalized, by count. */
const workerLog = new Map<string, number>();
const unexpectedExits: string[] = [];
let shuttingDown = false;

function noteWorkerLine(line: string): void {
  if (!line.trim() || /^\s+at /.test(line)) return;
  const key = line
    .replace(/[0-9a-z]{8,}[0-9a-f]{12}/g, '<id>')
    .replace(/\d+/g, '#')
    .slice(0, 160);
  workerLog.set(key, (workerLog.get(key) ?? 0) + 1);
}

class Workers {
  readonly children: WorkerChild[] = [];

  constructor(private readonly redisUrl: string) {}

  spawn(slot: number): WorkerChild {
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      CHAOS_REDIS_URL: this.redisUrl,
      CHAOS_PREFIX: PREFIX,
      CHAOS_CONCURRENCY: String(CONCURRENCY),
      CHAOS_STEP_MS: String(STEP_MS),
      CHAOS_MAX_ATTEMPTS: String(MAX_ATTEMPTS),
      CHAOS_BLOCK_MS: String(BLOCK_MS),
    };
    delete env.REDIS_URL;
    delete env.REDFLOW_PREFIX;
    const proc = spawn(process.execPath, ['-r', '@swc-node/register', WORKER_SCRIPT], { cwd: ROOT, env, stdio: ['pipe', 'pipe', 'pipe'] });
    proc.stdin!.on('error', () => undefined);
    const child: WorkerChild = { slot, proc, ready: false, killedByUs: false, exited: Promise.resolve() };
    let tail = '';
    proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      if (chunk.includes('ready')) child.ready = true;
    });
    let partial = '';
    proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      tail = (tail + chunk).slice(-2_000);
      const lines = (partial + chunk).split('\n');
      partial = lines.pop() ?? '';
      lines.forEach(noteWorkerLine);
    });
    child.exited = new Promise((resolve) => {
      proc.once('exit', (code, signal) => {
        if (!child.killedByUs && !shuttingDown) {
          const reason = tail
            .split('\n')
            .filter((l) => l.trim() && !/^\s+at /.test(l))
            .slice(-2)
            .join(' | ');
          unexpectedExits.push(`code ${code}, signal ${signal}: ${reason.replace(/\d+/g, '#').slice(0, 300)}`);
          log(`worker pid ${proc.pid} exited unexpectedly (code ${code}, signal ${signal}); starting a replacement`);
          setTimeout(() => {
            if (!shuttingDown && this.children[slot] === child) this.children[slot] = this.spawn(slot);
          }, 500);
        }
        resolve();
      });
      proc.once('error', () => resolve());
    });
    this.children[slot] = child;
    return child;
  }

  alive(): WorkerChild[] {
    return this.children.filter((c) => c.proc.exitCode === null && c.proc.signalCode === null);
  }

  async kill(child: WorkerChild): Promise<void> {
    child.killedByUs = true;
    if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
    await child.exited;
  }

  async waitReady(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.children.some((c) => !c.ready)) {
      if (Date.now() > deadline) throw new Error(`Workers not ready within ${timeoutMs} ms. Log: ${[...workerLog.keys()].slice(0, 5).join(' | ')}`);
      await sleep(50);
    }
  }

  killAllNow(): void {
    for (const c of this.children) {
      c.killedByUs = true;
      if (c.proc.exitCode === null && c.proc.signalCode === null) c.proc.kill('SIGKILL');
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Faults

type FaultKind = 'workerKill' | 'redisRestart' | 'fullRedis' | 'blockedLoop';
const FAULT_KINDS: FaultKind[] = ['workerKill', 'redisRestart', 'fullRedis', 'blockedLoop'];

class Faults {
  readonly counts: Record<FaultKind, number> = { workerKill: 0, redisRestart: 0, fullRedis: 0, blockedLoop: 0 };
  private bag: FaultKind[] = [];

  constructor(
    private readonly server: RedisServer,
    private readonly admin: Redis,
    private readonly workers: Workers,
  ) {}

  /** The next kind: shuffled rounds of all four, so every kind comes up evenly. */
  private nextKind(): FaultKind {
    if (!this.bag.length) {
      this.bag = [...FAULT_KINDS];
      for (let i = this.bag.length - 1; i > 0; i--) {
        const j = between(0, i);
        [this.bag[i], this.bag[j]] = [this.bag[j], this.bag[i]];
      }
    }
    return this.bag.pop()!;
  }

  /** Injects faults at random intervals until `until()` is true. */
  async loop(until: () => boolean): Promise<void> {
    for (;;) {
      const wait = between(FAULT_MIN_MS, FAULT_MAX_MS);
      const end = Date.now() + wait;
      while (Date.now() < end && !until()) await sleep(Math.min(100, end - Date.now()));
      if (until()) return;
      await this.inject(this.nextKind());
    }
  }

  private async inject(kind: FaultKind): Promise<void> {
    switch (kind) {
      case 'workerKill': {
        const alive = this.workers.alive();
        if (!alive.length) return;
        const victim = alive[between(0, alive.length - 1)];
        log(`fault: SIGKILL worker pid ${victim.proc.pid}, starting a replacement`);
        await this.workers.kill(victim);
        if (!shuttingDown) this.workers.spawn(victim.slot);
        break;
      }
      case 'redisRestart': {
        const down = between(0, 1_000);
        log(`fault: SIGKILL redis-server, restart after ${down} ms`);
        await this.server.kill();
        await sleep(down);
        if (shuttingDown) return;
        const t = Date.now();
        await this.server.start();
        log(`        redis-server answers PING again (${Date.now() - t} ms after start)`);
        break;
      }
      case 'fullRedis': {
        const info = await this.admin.info('memory');
        const used = Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
        const limit = used + 32 * 1024;
        const hold = between(2_000, 3_000);
        log(`fault: Redis full for ${hold} ms (maxmemory ${limit}, used ${used}, noeviction)`);
        await this.admin.config('SET', 'maxmemory-policy', 'noeviction');
        await this.admin.config('SET', 'maxmemory', String(limit));
        await sleep(hold);
        await this.admin.config('SET', 'maxmemory', '0');
        break;
      }
      case 'blockedLoop': {
        const ready = this.workers.alive().filter((c) => c.ready);
        if (!ready.length) return this.inject('workerKill');
        const victim = ready[between(0, ready.length - 1)];
        log(`fault: block the event loop of worker pid ${victim.proc.pid} for ${BLOCK_MS} ms`);
        victim.proc.kill('SIGUSR2');
        break;
      }
    }
    this.counts[kind]++;
  }
}

// ---------------------------------------------------------------------------------------------
// Enqueueing and waiting

const TERMINAL = new Set(['succeeded', 'failed', 'canceled']);

class Runs {
  /** Run id → input n, for every run whose enqueue succeeded. */
  readonly byId = new Map<string, number>();
  /** Run ids not yet seen in a terminal status. */
  readonly pending = new Set<string>();
  readonly enqueueErrors = new Map<string, number>();
  notEnqueued = 0;
  enqueueDone = false;

  constructor(
    private readonly client: WorkflowClient,
    private readonly registry: WorkflowRegistry,
    private readonly deadline: number,
  ) {}

  /** Enqueues run i, retrying on errors with the same idempotency key (a retry returns the same run). */
  private async enqueueOne(n: number): Promise<void> {
    const definition = this.registry.get(CHAOS_WORKFLOW)!;
    for (let pause = 50; ; pause = Math.min(pause * 2, 1_000)) {
      try {
        const handle = await this.client.start(definition, { n } satisfies ChaosInput, chaosRunOptions(n));
        this.byId.set(handle.id, n);
        this.pending.add(handle.id);
        return;
      } catch (error) {
        const name = (error as Error)?.name ?? 'Error';
        this.enqueueErrors.set(name, (this.enqueueErrors.get(name) ?? 0) + 1);
        if (Date.now() > this.deadline) {
          this.notEnqueued++;
          return;
        }
        await sleep(pause);
      }
    }
  }

  /** Enqueues RUNS runs evenly over DURATION_MS. */
  async enqueueAll(): Promise<void> {
    const t0 = Date.now();
    const inflight: Promise<void>[] = [];
    for (let n = 0; n < RUNS; n++) {
      const due = t0 + (n * DURATION_MS) / RUNS;
      if (due > Date.now()) await sleep(due - Date.now());
      inflight.push(this.enqueueOne(n));
    }
    await Promise.all(inflight);
    this.enqueueDone = true;
  }

  /** Drops ended runs from `pending` (one pipelined HGET per pending run). */
  async poll(): Promise<void> {
    const ids = [...this.pending];
    if (!ids.length) return;
    const pipeline = this.client.redis.pipeline();
    for (const id of ids) pipeline.hget(this.client.keys.run(id), 'status');
    const replies = (await pipeline.exec()) ?? [];
    ids.forEach((id, i) => {
      const [error, status] = replies[i] ?? [];
      if (!error && typeof status === 'string' && TERMINAL.has(status)) this.pending.delete(id);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Report

interface Execution {
  pid: string;
  /** The step's succeeded record was already in the run hash when the body's first read ran. */
  stored: boolean;
  startedAt: number;
  attempt: number;
  recordAttempt: number;
  recordFinishedAt: number;
  readAt: number;
}

interface Outcome {
  rows: Array<[string, number]>;
  ok: boolean;
  notes: string[];
}

/**
 * Reads the final state and execution records. Columns:
 * - runs: runs enqueued (distinct run ids the client got back).
 * - worker kills / Redis restarts / full-Redis faults / blocked-loop faults: faults injected.
 * - lost: enqueued run ids whose run hash no longer exists.
 * - stranded: existing runs not in a terminal status (succeeded, failed, canceled) at the end.
 * - failed: runs that ended `failed` or `canceled`.
 * - steps ran twice / steps ran 3+ times: (run, step) pairs whose body started exactly 2 / 3 or more
 *   times (each execution is recorded by the body before it does anything else).
 * - completed steps re-run: (run, step) pairs with an execution whose body started after the
 *   stored succeeded record's finishedAt (taken before the record is sent, so this never misses a
 *   body that started after the record was stored). Executions whose first action, a read of the
 *   run hash, found the record stored but whose body started before it (their read was delayed by
 *   a blocked event loop or an outage) are listed in a note: they started while the step had no
 *   record, like any duplicate counted in "steps ran twice / 3+ times".
 * - max runs of one step body: the most executions of any one (run, step) pair.
 */
async function report(client: WorkflowClient, runs: Runs, faults: Faults): Promise<Outcome> {
  const redis = client.redis;
  const ids = [...runs.byId.keys()];
  const pipeline = redis.pipeline();
  for (const id of ids) {
    pipeline.exists(client.keys.run(id));
    pipeline.hmget(client.keys.run(id), 'status', 'output', 'error');
  }
  const replies = (await pipeline.exec()) ?? [];
  let lost = 0;
  let stranded = 0;
  let failed = 0;
  let wrongOutput = 0;
  const failedNames = new Map<string, number>();
  const strandedStatus = new Map<string, number>();
  const succeeded = new Set<string>();
  ids.forEach((id, i) => {
    const [existsError, exists] = replies[2 * i];
    const [fieldsError, fields] = replies[2 * i + 1];
    if (existsError || fieldsError) throw existsError ?? fieldsError;
    if (exists === 0) {
      lost++;
      return;
    }
    const [status, output, error] = fields as (string | null)[];
    if (!status || !TERMINAL.has(status)) {
      stranded++;
      strandedStatus.set(String(status), (strandedStatus.get(String(status)) ?? 0) + 1);
    } else if (status === 'succeeded') {
      succeeded.add(id);
      let value: unknown;
      try {
        value = JSON.parse(output ?? '');
      } catch {
        value = undefined;
      }
      if (value !== expectedOutput(runs.byId.get(id)!)) wrongOutput++;
    } else {
      failed++;
      let name = status === 'canceled' ? 'CanceledError' : 'unknown';
      try {
        name = (JSON.parse(error ?? '') as { name?: string }).name ?? name;
      } catch {
        // keep the fallback
      }
      const key = `${name} (${status})`;
      failedNames.set(key, (failedNames.get(key) ?? 0) + 1);
    }
  });

  // Executions per (run, step), see chaos-worker.ts `recordExecution` for the value's fields.
  const execs = new Map<string, Execution[]>();
  let cursor = '0';
  do {
    const [next, flat] = await redis.hscan(execsKey(PREFIX), cursor, 'COUNT', 1000);
    cursor = next;
    for (let i = 0; i < flat.length; i += 2) {
      const [runId, step, execution] = flat[i].split('|');
      const [stored, startedAt, attempt, recordAttempt, recordFinishedAt, readAt] = flat[i + 1].split('|');
      const pair = `${runId}|${step}`;
      const list = execs.get(pair) ?? [];
      list.push({
        pid: execution.split('.')[0],
        stored: stored === '1',
        startedAt: Number(startedAt),
        attempt: Number(attempt),
        recordAttempt: Number(recordAttempt),
        recordFinishedAt: Number(recordFinishedAt),
        readAt: Number(readAt),
      });
      execs.set(pair, list);
    }
  } while (cursor !== '0');
  let twice = 0;
  let threePlus = 0;
  const manyRuns: string[] = [];
  let rerunAfterStored = 0;
  let startedAfterFinish = 0;
  let maxRuns = 0;
  const examples: string[] = [];
  for (const [pair, list] of execs) {
    const count = list.length;
    if (count === 2) twice++;
    if (count >= 3) {
      threePlus++;
      // Each body start, on the fault log's clock, to pair every extra run with the fault before it.
      if (manyRuns.length < 5)
        manyRuns.push(
          `run ${pair.replace('|', ' step ')}: ${[...list]
            .sort((a, b) => a.startedAt - b.startedAt)
            .map((e) => `pid ${e.pid} attempt ${e.attempt} at ${((e.startedAt - started) / 1000).toFixed(1)} s`)
            .join('; ')}`,
        );
    }
    maxRuns = Math.max(maxRuns, count);
    const late = list.filter((e) => e.stored);
    if (!late.length) continue;
    rerunAfterStored++;
    if (late.some((e) => e.startedAt > e.recordFinishedAt)) startedAfterFinish++;
    if (examples.length < 5) {
      const finished = late[0].recordFinishedAt;
      const rel = (t: number) => `${t - finished >= 0 ? '+' : ''}${t - finished} ms`;
      const detail = list
        .sort((a, b) => a.startedAt - b.startedAt)
        .map(
          (e) =>
            `pid ${e.pid} attempt ${e.attempt} started ${rel(e.startedAt)}, read ${rel(e.readAt)}${e.stored ? ` and saw the record of attempt ${e.recordAttempt}` : ''}`,
        )
        .join('; ');
      examples.push(`run ${pair.replace('|', ' step ')} (times relative to the stored record's finishedAt): ${detail}`);
    }
  }
  let unrecorded = 0;
  for (const id of succeeded) for (const step of STEPS) if (!execs.has(`${id}|${step}`)) unrecorded++;

  const rows: Array<[string, number]> = [
    ['runs', ids.length],
    ['worker kills', faults.counts.workerKill],
    ['Redis restarts', faults.counts.redisRestart],
    ['full-Redis faults', faults.counts.fullRedis],
    ['blocked-loop faults', faults.counts.blockedLoop],
    ['lost', lost],
    ['stranded', stranded],
    ['failed', failed],
    ['steps ran twice', twice],
    ['steps ran 3+ times', threePlus],
    ['completed steps re-run', startedAfterFinish],
    ['max runs of one step body', maxRuns],
  ];
  const notes: string[] = [];
  const list = (m: Map<string, number>) => [...m].map(([k, v]) => `${k} x${v}`).join(', ');
  notes.push(`failed/canceled runs by error: ${failedNames.size ? list(failedNames) : 'none'}`);
  if (stranded) notes.push(`stranded runs by status: ${list(strandedStatus)}`);
  if (rerunAfterStored) {
    notes.push(
      `executions that read the stored record of their step: ${rerunAfterStored}, of which ${startedAfterFinish} started after its finishedAt (counted as completed steps re-run); examples:\n    ${examples.join('\n    ')}`,
    );
  }
  if (manyRuns.length) notes.push(`steps whose body ran 3+ times (each start, on the fault log's clock):\n    ${manyRuns.join('\n    ')}`);
  notes.push(`succeeded runs with a wrong output: ${wrongOutput}`);
  notes.push(`steps of succeeded runs with no recorded execution (should be 0): ${unrecorded}`);
  notes.push(`runs never enqueued (enqueue still failing at the deadline): ${runs.notEnqueued}`);
  notes.push(`enqueue errors retried: ${runs.enqueueErrors.size ? list(runs.enqueueErrors) : 'none'}`);
  const exits = new Map<string, number>();
  for (const reason of unexpectedExits) exits.set(reason, (exits.get(reason) ?? 0) + 1);
  const exitLines = [...exits].slice(0, 5).map(([reason, count]) => `${count} x ${reason}`);
  notes.push(`worker processes that exited on their own (replaced): ${unexpectedExits.length}${exitLines.length ? `\n    ${exitLines.join('\n    ')}` : ''}`);
  const ok = lost === 0 && stranded === 0 && maxRuns <= 2 && startedAfterFinish === 0 && wrongOutput === 0 && runs.notEnqueued === 0;
  return { rows, ok, notes };
}

function table(rows: Array<[string, number]>): string {
  const head = `| ${rows.map(([h]) => h).join(' | ')} |`;
  const rule = `| ${rows.map(([h]) => '-'.repeat(Math.max(3, h.length - 1)) + ':').join(' | ')} |`;
  const body = `| ${rows.map(([h, v]) => String(v).padStart(h.length)).join(' | ')} |`;
  return [head, rule, body].join('\n');
}

// ---------------------------------------------------------------------------------------------
// Main, with cleanup on every way out

let server: RedisServer | undefined;
let workers: Workers | undefined;
let dir: string | undefined;
const connections: Redis[] = [];

function cleanupNow(): void {
  shuttingDown = true;
  workers?.killAllNow();
  server?.killNow();
  for (const c of connections) c.disconnect();
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
}

async function cleanup(): Promise<void> {
  shuttingDown = true;
  if (workers) await Promise.all(workers.children.map((c) => workers!.kill(c)));
  for (const c of connections) c.disconnect();
  if (server) await server.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    console.error(`\n${signal}: stopping workers and redis-server, removing ${dir ?? 'nothing'}`);
    cleanup()
      .catch(() => cleanupNow())
      .finally(() => process.exit(130));
  });
}
process.once('exit', () => cleanupNow());

async function main(): Promise<number> {
  dir = mkdtempSync(join(tmpdir(), 'redflow-chaos-'));
  server = new RedisServer(await freePort(), dir);
  await server.start();
  log(
    `seed ${SEED}; queue ${CHAOS_QUEUE}; ${RUNS} runs over ${DURATION_MS} ms; ${WORKERS} workers x concurrency ${CONCURRENCY}; ` +
      `faults every ${FAULT_MIN_MS}-${FAULT_MAX_MS} ms; redis-server ${server.url} (AOF, appendfsync always) in ${dir}; prefix ${PREFIX}`,
  );

  const open = () => {
    const c = new Redis(server!.url, { maxRetriesPerRequest: null });
    c.on('error', () => undefined);
    connections.push(c);
    return c;
  };
  const admin = open();
  const registry = new WorkflowRegistry();
  // The same options as the workers' definition; the handler only runs in the workers.
  registry.define(CHAOS_WORKFLOW, chaosWorkflowOptions(MAX_ATTEMPTS), async () => {
    throw new Error('chaos runs execute in the worker processes');
  });
  const client = createClient({ redis: open(), prefix: PREFIX, registry });
  const deadline = started + TIMEOUT_MS;

  workers = new Workers(server.url);
  for (let slot = 0; slot < WORKERS; slot++) workers.spawn(slot);
  await workers.waitReady(60_000);
  log(`${WORKERS} workers ready`);

  const runs = new Runs(client, registry, deadline);
  const faults = new Faults(server, admin, workers);
  const enqueueing = runs.enqueueAll();
  const faulting = faults.loop(() => runs.enqueueDone || Date.now() > deadline);

  let lastProgress = 0;
  while ((!runs.enqueueDone || runs.pending.size > 0) && Date.now() < deadline) {
    await Promise.race([runs.poll().catch(() => undefined), sleep(Math.max(0, deadline - Date.now()))]);
    if (Date.now() - lastProgress >= 10_000) {
      lastProgress = Date.now();
      const f = faults.counts;
      log(
        `enqueued ${runs.byId.size}/${RUNS}, not ended ${runs.pending.size}; faults: ${f.workerKill} kills, ${f.redisRestart} restarts, ` +
          `${f.fullRedis} full, ${f.blockedLoop} blocked`,
      );
    }
    await sleep(500);
  }
  if (runs.pending.size > 0 || !runs.enqueueDone) log(`deadline (${TIMEOUT_MS} ms after the start) reached with ${runs.pending.size} runs not ended`);
  // Faults stop once enqueueing ended; a fault under way (a restart, a full Redis) is finished first.
  await faulting;
  if (!runs.enqueueDone) log('enqueueing has not finished: runs whose enqueue still fails are counted as never enqueued');
  await Promise.race([enqueueing, sleep(5_000)]);
  await admin.config('SET', 'maxmemory', '0');

  const outcome = await report(client, runs, faults);
  const wall = elapsed();
  await cleanup();
  console.log('');
  console.log(table(outcome.rows));
  console.log('');
  console.log(
    `seed ${SEED}, elapsed ${wall} (${WORKERS} workers x concurrency ${CONCURRENCY}, lease ${FAST_RUNTIME.leaseDuration} ms, blocked loop ${BLOCK_MS} ms)`,
  );
  for (const note of outcome.notes) console.log(`- ${note}`);
  const top = [...workerLog].sort((a, b) => b[1] - a[1]).slice(0, 8);
  if (top.length) {
    console.log('- most frequent worker log lines (numbers as #):');
    for (const [line, count] of top) console.log(`    ${String(count).padStart(5)} x ${line}`);
  }
  console.log(outcome.ok ? 'PASS' : 'FAIL: lost or stranded runs, a completed step re-run, a step body run 3+ times, a wrong output or a run never enqueued');
  return outcome.ok ? 0 : 1;
}

main()
  .then((code) => process.exit(code))
  .catch(async (error: unknown) => {
    console.error(`chaos failed: ${(error as Error)?.stack ?? String(error)}`);
    await cleanup().catch(() => cleanupNow());
    process.exit(1);
  });
