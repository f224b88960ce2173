import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { WorkflowClient, createClient, RUN_INDEX_LEASE_MS, type ClientOptions } from '../client/workflow-client';
import { fireDueCrons } from './cron-ticker';
import { closeConnection, duplicateConnection, type ConnectionOptions } from '../store/connection';
import { ConfigurationError } from '../errors';
import { assertKnownKeys, checkDuration, checkInteger, checkResourceName, checkUserName, optionKeys, parseVersionQueue, versionQueue } from '../definition/option-checks';
import { withTimeout, type RedisHealth } from '../store/redis-health';
import type { ClaimedRun, RedisConnection, RedisScripts } from '../store/redis-scripts';
import { RunExecutor, type ExecutorHost } from './run-executor';
import { checkHooks, HookRunner } from './hooks';
import type { WorkerHooks } from '../definition/hooks';
import { checkTracingOption, GuardedTracing, type RedflowTracing } from '../definition/tracing';
import type { StepMocks } from './step-runtime';
import type { Clock } from '../definition/clock';
import { stderrLogger, type RedflowLogger } from '../definition/types';
import { getDefaultRegistry, type WorkflowRegistry } from '../definition/workflow';

/** Timing of a worker. */
export interface WorkerRuntimeOptions {
  /** How long a run stays claimed without a heartbeat before another worker may take it. @default 10000 */
  leaseMs?: number;
  /** How often leases are renewed. @default leaseMs / 3 */
  heartbeatMs?: number;
  /** How often expired leases are looked for. @default 1000 */
  reaperIntervalMs?: number;
  /** Longest blocking wait for new runs before due scheduled runs are checked again. @default 1000 */
  blockTimeoutMs?: number;
  /** How often ended runs past retention are deleted. @default 60000 */
  cleanupIntervalMs?: number;
  /**
   * A run whose lease expired more often than this in a row (its worker crashed each time) fails
   * with RunCrashedError instead of being resumed again. An attempt that stores a step or ends
   * resets the count, so ordinary step errors never add to it. @default 5
   */
  maxRecoveries?: number;
}

/** Options of `startWorker`. */
export interface WorkerOptions extends ConnectionOptions {
  /** A stable id of the app: owner of the workflows this worker registers. */
  app: string;
  /** The client to use (its connection, prefix and registry). Otherwise one is created from url/redis/prefix. */
  client?: WorkflowClient;
  /** @default process.env.REDFLOW_PREFIX ?? "redflow" */
  prefix?: string;
  /** Queues to serve. @default the queues of the registry's workflows */
  queues?: string[];
  /** Runs executed at the same time. @default 1 */
  concurrency?: number;
  /** Workflows this worker executes. @default the client's registry */
  registry?: WorkflowRegistry;
  runtime?: WorkerRuntimeOptions;
  /** @default warnings and errors to stderr */
  logger?: RedflowLogger;
  /** Largest step output in bytes. @default the client's (1 MiB) */
  maxPayloadBytes?: ClientOptions['maxPayloadBytes'];
  /** maxConcurrency of workflows that do not set one. `Infinity` for no limit. @default 1 */
  defaultMaxConcurrency?: number;
  /**
   * Ended runs are deleted this many days after they finished (fractions allowed).
   * @default process.env.REDFLOW_RUN_RETENTION_DAYS ?? 30
   */
  retentionDays?: number;
  /** For the client the worker creates (no `client` given): see ClientOptions. @default 10000 */
  commandTimeoutMs?: number;
  /** For the client the worker creates (no `client` given): see ClientOptions. @default false */
  requireNoEviction?: boolean;
  /** Lifecycle hooks, called in this process as its runs and steps start and end (see WorkerHooks). */
  hooks?: WorkerHooks;
  /**
   * Tracing, such as `redflowTracing()` from `nestjs-redflow/otel`: a span per run attempt and per
   * try of a step, children of the trace context stored with the run. Also given to the client the
   * worker creates (no `client` given), which then stores the trace context of the runs it starts.
   * @default the client's `tracing` (none)
   */
  tracing?: RedflowTracing;
  /** @internal Step mocks of `nestjs-redflow/testing`; not for production use. */
  stepMocks?: StepMocks;
}

/** Keys of `WorkerRuntimeOptions` (the worker's `runtime` option). */
export const WORKER_RUNTIME_KEYS = optionKeys<WorkerRuntimeOptions>()([
  'leaseMs',
  'heartbeatMs',
  'reaperIntervalMs',
  'blockTimeoutMs',
  'cleanupIntervalMs',
  'maxRecoveries',
]);

/** Options of `worker.stop()`. */
export interface WorkerStopOptions {
  /**
   * How long (ms) running runs may take to finish; what is still running then is left to be
   * resumed by another worker once its lease expires. 0 leaves them at once.
   * @default 10000
   */
  timeoutMs?: number;
}

/** Keys of `WorkerStopOptions`. */
const WORKER_STOP_OPTION_KEYS = optionKeys<WorkerStopOptions>()(['timeoutMs']);

/** Keys of `WorkerOptions` (`startWorker`). */
export const WORKER_OPTION_KEYS = optionKeys<WorkerOptions>()([
  'redis',
  'url',
  'app',
  'client',
  'prefix',
  'queues',
  'concurrency',
  'registry',
  'runtime',
  'logger',
  'maxPayloadBytes',
  'defaultMaxConcurrency',
  'retentionDays',
  'commandTimeoutMs',
  'requireNoEviction',
  'hooks',
  'tracing',
  'stepMocks',
]);

/** A snapshot of a worker's state, from `worker.liveness`. */
export interface WorkerLiveness {
  workerId: string;
  queues: string[];
  /** False once `stop()` was called. */
  claiming: boolean;
  /** True once the worker stopped for good (its timers are cancelled). */
  stopped: boolean;
  /** False while its Redis is unreachable or refusing writes. */
  redisHealthy: boolean;
  /** Runs executing here now. */
  activeRuns: number;
  concurrency: number;
  leaseMs: number;
  /** When its heartbeat timer last ran (ms, real time): every `heartbeatMs` while its event loop runs. */
  lastHeartbeatAt: number;
  /** When it last started a run it claimed (ms, real time), if it has claimed one. */
  lastClaimAt?: number;
}

/** What `untilStopped` resolves with once the worker is stopping. */
const STOPPED = Symbol('stopped');

const PROMOTE_BATCH = 100;
/** How often a list holding runs left for another version is claimed from (it cannot be blocked on). */
const LEFT_RUNS_POLL_MS = 1_000;
const REAP_BATCH = 100;
const CLEANUP_BATCH = 500;
const DAY_MS = 86_400_000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The lists a worker claims from for its queues: a queue itself (version 1, or no workflow of the
 * registry on it) and `<queue>@v<N>` for each version N > 1 of a workflow of the registry on it.
 */
function versionQueues(queues: string[], registry: WorkflowRegistry): string[] {
  const served = new Set<string>();
  for (const queue of queues) {
    const versions = registry.list().filter((d) => d.queue === queue).map((d) => d.version);
    if (!versions.length || versions.includes(1)) served.add(queue);
    for (const version of versions) served.add(versionQueue(queue, version));
  }
  return [...served];
}

/**
 * For each list a worker claims from, the workflows of its registry on the same queue at another
 * version (a version-1 queue shared by workflow B at v1 and workflow A at v2): their runs in that
 * list are left by the claim for a worker with their version. Only lists that have some.
 */
function claimSkips(lists: string[], registry: WorkflowRegistry): Map<string, string[]> {
  const skips = new Map<string, string[]>();
  for (const list of lists) {
    const { queue, version } = parseVersionQueue(list);
    const others = registry.list().filter((d) => d.queue === queue && d.version !== version).map((d) => d.name);
    if (others.length) skips.set(list, others);
  }
  return skips;
}

/**
 * Executes runs. Each served queue has a loop that claims while the worker has a free slot and
 * otherwise blocks on the queue's ready list (BLMOVE of the list onto itself: it wakes on a new run
 * without taking it, so a crash here strands nothing). Finishing a run claims the next one in the
 * same script, so a busy worker does not go back to the loop at all.
 */
export class Worker implements ExecutorHost {
  readonly workerId: string;
  readonly app: string;
  readonly scripts: RedisScripts;
  readonly registry: WorkflowRegistry;
  readonly queues: string[];
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly maxPayloadBytes: number;
  readonly logger: RedflowLogger;
  readonly health: RedisHealth;
  readonly hooks: HookRunner;
  /** Tracing, guarded: the worker's option, else its client's; undefined when off. */
  readonly tracing: GuardedTracing | undefined;
  /** Workflow time, the client's: due times and background timers. Leases use real time. */
  readonly clock: Clock;
  /** @internal Test step mocks (`nestjs-redflow/testing`); not a public option. */
  readonly stepMocks: StepMocks | undefined;
  private readonly heartbeatMs: number;
  private readonly reaperIntervalMs: number;
  private readonly maxRecoveries: number;
  private readonly blockTimeoutMs: number;
  private readonly cleanupIntervalMs: number;
  private readonly retentionMs: number;
  private readonly defaultMaxConcurrency: number | undefined;
  private readonly active = new Map<string, RunExecutor>();
  private reserved = 0;
  private stopping = false;
  private claims = 0;
  private timersStopped = false;
  private stopped: Promise<void> | undefined;
  /** Resolves when stop() begins: waits of the queue loops end then, even on a dead connection. */
  private readonly stopRequested: { promise: Promise<void>; resolve: () => void } = (() => {
    let resolve!: () => void;
    const promise = new Promise<void>((r) => (resolve = r));
    return { promise, resolve };
  })();
  private slotWaiters: Array<() => void> = [];
  private idleWaiters: Array<() => void> = [];
  private readonly blocking: RedisConnection[] = [];
  private subscriber: RedisConnection | undefined;
  private readonly timers = new Set<() => void>();
  private readonly loops: Promise<void>[] = [];
  private lastHeartbeatAt = Date.now();
  /** When this worker last started a run it claimed (0: none yet). */
  private lastClaimAt = 0;
  /** The last time the event loop was blocked for more than half the lease. */
  private lastBlock: { endedAt: number; ms: number } | undefined;
  private lastLagWarningAt = 0;
  private lagTimer: NodeJS.Timeout | undefined;
  private indexing: Promise<void> = Promise.resolve();
  /** `<workflow> v<N>` of versions warned about (no worker, runs left in a list, or claimed here without the code). */
  private readonly warnedVersions = new Set<string>();
  /** ExecutorHost: per list, the workflows whose runs the claim leaves there (see claimSkips; versionMismatch adds). */
  readonly claimSkips: Map<string, readonly string[]>;
  private lastVersionCheckAt = 0;

  constructor(
    readonly client: WorkflowClient,
    private readonly ownsClient: boolean,
    options: WorkerOptions,
  ) {
    assertKnownKeys('startWorker options', options, WORKER_OPTION_KEYS);
    if (!options.app) throw new ConfigurationError('startWorker needs an app: a stable id of the app, used as the owner of its workflows in Redis.');
    this.app = checkUserName(options.app, 'startWorker app');
    this.workerId = `${options.app}:${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
    this.scripts = client.scripts;
    this.registry = options.registry ?? client.registry;
    if (options.queues !== undefined && !Array.isArray(options.queues)) {
      throw new ConfigurationError(`startWorker queues must be an array of queue names, got ${typeof options.queues}.`);
    }
    if (options.client) {
      const ignored = (['redis', 'url', 'prefix', 'commandTimeoutMs', 'requireNoEviction'] as const).filter((k) => options[k] !== undefined);
      if (ignored.length) {
        throw new ConfigurationError(`startWorker got both client and ${ignored.join(', ')}: the client already has its connection and settings. Set ${ignored.join(', ')} on the client, or pass no client.`);
      }
    }
    this.queues = (options.queues ?? this.registry.queues()).map((q, i) => checkResourceName(q, `startWorker queues[${i}]`));
    if (!this.queues.length) this.queues = ['default'];
    this.queues = versionQueues(this.queues, this.registry);
    this.claimSkips = claimSkips(this.queues, this.registry);
    this.concurrency = checkInteger(options.concurrency ?? 1, 'Worker concurrency', 1, 100_000);
    const runtime = options.runtime ?? {};
    assertKnownKeys('startWorker runtime options', runtime, WORKER_RUNTIME_KEYS);
    const duration = (value: number | undefined, name: keyof WorkerRuntimeOptions, fallback: number) =>
      value === undefined ? fallback : checkDuration(value, `runtime.${name}`, { timer: true });
    this.leaseMs = duration(runtime.leaseMs, 'leaseMs', 10_000);
    this.heartbeatMs = duration(runtime.heartbeatMs, 'heartbeatMs', Math.max(50, Math.floor(this.leaseMs / 3)));
    if (this.heartbeatMs >= this.leaseMs) {
      throw new ConfigurationError(`runtime.heartbeatMs (${this.heartbeatMs}) must be shorter than runtime.leaseMs (${this.leaseMs}), or every lease expires before it is renewed; a third of leaseMs is the default.`);
    }
    this.reaperIntervalMs = duration(runtime.reaperIntervalMs, 'reaperIntervalMs', 1_000);
    this.maxRecoveries = checkInteger(runtime.maxRecoveries ?? 5, 'runtime.maxRecoveries', 1, 1_000_000);
    this.blockTimeoutMs = duration(runtime.blockTimeoutMs, 'blockTimeoutMs', 1_000);
    this.cleanupIntervalMs = duration(runtime.cleanupIntervalMs, 'cleanupIntervalMs', 60_000);
    const retentionDays = options.retentionDays ?? Number(process.env.REDFLOW_RUN_RETENTION_DAYS ?? 30);
    if (!(retentionDays > 0 && retentionDays <= 3650)) {
      throw new ConfigurationError(`retentionDays (or REDFLOW_RUN_RETENTION_DAYS) must be a number of days > 0 and at most 3650, got ${retentionDays}.`);
    }
    this.retentionMs = retentionDays * DAY_MS;
    if (options.defaultMaxConcurrency !== undefined && options.defaultMaxConcurrency !== Infinity) {
      checkInteger(options.defaultMaxConcurrency, 'defaultMaxConcurrency', 1, 1_000_000);
    }
    this.defaultMaxConcurrency = options.defaultMaxConcurrency;
    this.maxPayloadBytes = checkInteger(options.maxPayloadBytes ?? client.maxPayloadBytes, 'maxPayloadBytes', 1, 512 * 1024 * 1024);
    this.logger = options.logger ?? client.logger ?? stderrLogger;
    this.health = client.health;
    this.clock = client.clock;
    this.stepMocks = options.stepMocks;
    this.hooks = new HookRunner(checkHooks(options.hooks), this.logger);
    const tracing = checkTracingOption(options.tracing, 'startWorker option');
    this.tracing = tracing ? new GuardedTracing(tracing, this.logger) : client.tracing;
  }

  /** Logs an error of the worker's own and hands it to the `onError` hook. */
  reportError(error: unknown, task: string, message: string, runId?: string, level: 'warn' | 'error' = 'error'): void {
    if (level === 'warn') this.logger.warn(message);
    else this.logger.error(message, (error as Error)?.stack);
    this.hooks.error(error, { workerId: this.workerId, task, runId });
  }

  /** True while new runs may be claimed. */
  get claiming(): boolean {
    return !this.stopping;
  }

  nextLeaseToken(): string {
    return `${this.workerId}:${++this.claims}`;
  }

  /**
   * Settles once the (workflow, status) index of runs covers the runs stored before it existed
   * (built by this worker or another one), or the worker stopped first. Never rejects.
   */
  get runIndexReady(): Promise<void> {
    return this.indexing;
  }

  /** Ids of the runs executing now. */
  get activeRunIds(): string[] {
    return [...this.active.keys()];
  }

  /**
   * What a health check needs to know about this worker, read without touching Redis. Its timers
   * run while it is alive: `lastHeartbeatAt` older than `leaseMs` means they stalled or it stopped,
   * and its runs may be taken over by another worker.
   */
  get liveness(): WorkerLiveness {
    return {
      workerId: this.workerId,
      queues: [...this.queues],
      claiming: !this.stopping,
      stopped: this.timersStopped,
      redisHealthy: this.health.healthy,
      activeRuns: this.active.size,
      concurrency: this.concurrency,
      leaseMs: this.leaseMs,
      lastHeartbeatAt: this.lastHeartbeatAt,
      lastClaimAt: this.lastClaimAt || undefined,
    };
  }

  /** Registers the workflows, subscribes to cancellations and starts the queue loops and timers. */
  async start(): Promise<void> {
    await this.client.ready();
    await this.client.syncRegistry(this.registry, { owner: this.app, defaultMaxConcurrency: this.defaultMaxConcurrency });
    await this.scripts.presence(this.workerId, Date.now(), Date.now() + 3 * this.heartbeatMs, this.servedVersions());
    this.indexing = this.backfillRunIndex();
    const subscriber = duplicateConnection(this.client.redis, this.health);
    this.subscriber = subscriber;
    // "<run id>" for a cancel, "<run id>\nterminated" for a terminate (includes/cancel.lua).
    subscriber.on('message', (_channel: string, message: string) => {
      const [runId, how] = message.split('\n');
      if (how === 'terminated') this.active.get(runId)?.terminated();
      else this.active.get(runId)?.abort('canceled');
    });
    await subscriber.subscribe(this.client.keys.cancelChannel());
    for (const queue of this.queues) {
      const connection = duplicateConnection(this.client.redis, this.health);
      this.blocking.push(connection);
      this.loops.push(this.queueLoop(queue, connection));
    }
    // A heartbeat runs even while Redis refuses writes (its script keeps leases alive on a full
    // Redis); the other tasks wait until Redis is healthy.
    this.every(this.heartbeatMs, () => this.heartbeat());
    this.every(this.heartbeatMs, () => this.whenHealthy(() => this.presence()));
    this.every(this.reaperIntervalMs, () => this.whenHealthy(() => this.reap()));
    this.every(this.blockTimeoutMs, () => this.whenHealthy(() => this.promoteAll()));
    this.every(this.cleanupIntervalMs, () => this.whenHealthy(() => this.cleanup()));
    this.loop(async () => (this.health.healthy ? fireDueCrons(this.client, (error, message) => this.reportError(error, 'cron', message)) : 1_000));
    this.watchEventLoop();
  }

  /** Runs a background task only while Redis is healthy (else returns `fallback`). */
  private async whenHealthy(task: () => Promise<unknown>): Promise<void> {
    if (this.health.healthy) await task();
  }

  /**
   * Warns when the event loop was blocked for more than half the lease: runs of this worker may
   * then lose their lease to another worker while a step is still running here.
   */
  private watchEventLoop(): void {
    const interval = Math.max(20, Math.min(500, Math.floor(this.leaseMs / 4)));
    let last = Date.now();
    this.lagTimer = setInterval(() => {
      const now = Date.now();
      const blockedMs = now - last;
      last = now;
      if (blockedMs - interval <= this.leaseMs / 2) return;
      this.lastBlock = { endedAt: now, ms: blockedMs };
      if (now - this.lastLagWarningAt < 30_000) return;
      this.lastLagWarningAt = now;
      this.logger.warn(
        `The event loop of worker "${this.workerId}" was blocked for ${blockedMs} ms, more than half of leaseMs (${this.leaseMs} ms): its runs may lose their lease and be resumed by another worker. Move CPU-heavy work off the event loop (worker_threads) or raise leaseMs.`,
      );
    }, interval);
    this.lagTimer.unref();
  }

  /** Waits until Redis is healthy again, or the worker stops for good. */
  waitForRedis(): Promise<void> {
    return this.health.whenHealthy(() => this.timersStopped);
  }

  /**
   * An attempt found it no longer holds its run. If the event loop was blocked meanwhile, that
   * is why: say so once, with the fix.
   */
  leaseLost(runId: string, attemptStartedAt: number): void {
    const block = this.lastBlock;
    if (!block || block.endedAt < attemptStartedAt) return;
    this.logger.warn(
      `Run "${runId}" was taken over by another worker: the event loop of worker "${this.workerId}" was blocked for ${block.ms} ms while it ran, and its lease (leaseMs ${this.leaseMs} ms) expired. This attempt stopped without storing anything more; the run goes on from its last stored step. Raise leaseMs, or move CPU-heavy work off the event loop (worker_threads).`,
    );
  }

  /**
   * Stops claiming, waits up to `timeoutMs` for running runs to finish, and leaves the rest to be
   * resumed by another worker once their leases expire. Safe to call more than once. Rejects with
   * ConfigurationError for an unknown option or a bad `timeoutMs`, without stopping.
   */
  stop(options: WorkerStopOptions = {}): Promise<void> {
    let timeoutMs: number;
    try {
      assertKnownKeys('worker.stop options', options, WORKER_STOP_OPTION_KEYS);
      timeoutMs = options.timeoutMs === undefined ? 10_000 : checkDuration(options.timeoutMs, 'worker.stop timeoutMs', { allowZero: true, timer: true });
    } catch (error) {
      return Promise.reject(error);
    }
    this.stopped ??= this.shutdown(timeoutMs);
    return this.stopped;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    this.stopping = true;
    this.stopRequested.resolve();
    this.health.nudge();
    clearInterval(this.lagTimer);
    this.wake(this.slotWaiters);
    for (const connection of this.blocking) connection.disconnect();
    await Promise.allSettled(this.loops);
    if (this.active.size) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        new Promise<void>((resolve) => this.idleWaiters.push(resolve)),
        new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs))),
      ]);
      clearTimeout(timer);
      for (const executor of this.active.values()) executor.abandon();
    }
    // Leases were renewed while draining; from here on, unfinished runs are left to the reaper.
    this.timersStopped = true;
    this.health.nudge();
    for (const cancel of this.timers) cancel();
    this.timers.clear();
    // The run-index backfill stops at its next batch; a batch stuck on an unreachable Redis is not
    // waited for (its lease lets the next worker take over).
    let indexTimer: NodeJS.Timeout | undefined;
    await Promise.race([this.indexing, new Promise<void>((resolve) => (indexTimer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(indexTimer);
    const cleanups = [
      // Its versions are no longer served here: the registry says so at once, not when they expire.
      async () => this.health.healthy && (await withTimeout(this.scripts.presence(this.workerId, Date.now(), 0, this.servedVersions()), this.client.commandTimeoutMs, this.health.address)),
      async () => this.subscriber && (await closeConnection(this.subscriber)),
      async () => this.ownsClient && (await this.client.close()),
    ];
    for (const cleanup of cleanups) {
      try {
        await cleanup();
      } catch (error) {
        this.reportError(error, 'cleanup', `Worker "${this.workerId}" cleanup failed: ${(error as Error).message}`);
      }
    }
  }

  private async queueLoop(queue: string, blocking: RedisConnection): Promise<void> {
    const ready = this.client.keys.ready(queue);
    let failures = 0;
    while (!this.stopping) {
      if (!this.health.healthy) {
        // Claiming now would start runs whose steps could not be stored.
        await this.health.whenHealthy(() => this.stopping);
        continue;
      }
      if (this.active.size + this.reserved >= this.concurrency) {
        await new Promise<void>((resolve) => this.slotWaiters.push(resolve));
        continue;
      }
      try {
        this.reserved++;
        let claimed: ClaimedRun | null = null;
        let left: string | undefined;
        try {
          // While Redis is unreachable a call waits for the reconnection: stop() must not wait on it.
          // A claim answered after the stop is left to the reaper when its lease expires.
          const reply = await this.untilStopped(this.scripts.claim(queue, this.nextLeaseToken(), this.clock.now(), this.leaseMs, this.claimSkips.get(queue) ?? []));
          if (reply === STOPPED) break;
          if (reply && 'skipped' in reply) left = reply.skipped;
          else claimed = reply;
        } finally {
          this.reserved--;
          // The slot reserved for this claim is free again: other queues' loops may use it.
          if (!claimed) this.wake(this.slotWaiters);
        }
        failures = 0;
        if (claimed) {
          this.launch(claimed);
          continue;
        }
        const now = this.clock.now();
        const promoted = await this.untilStopped(this.scripts.promote(queue, now, PROMOTE_BATCH));
        if (promoted === STOPPED) break;
        const { moved, nextDue } = promoted;
        if (moved || this.stopping) continue;
        const waitMs = nextDue < 0 ? this.blockTimeoutMs : Math.min(this.blockTimeoutMs, nextDue - now);
        if (left !== undefined) {
          // The list holds runs left for another version: blocking on it would return at once.
          this.leftForVersion(queue, left);
          await Promise.race([sleep(Math.min(waitMs, LEFT_RUNS_POLL_MS)), this.stopRequested.promise]);
        } else if (waitMs >= 1) {
          // A connection that is reconnecting when it is closed never answers: stop() must not wait on it.
          await Promise.race([blocking.blmove(ready, ready, 'RIGHT', 'RIGHT', waitMs / 1000), this.stopRequested.promise]);
        }
      } catch (error) {
        if (this.stopping) break;
        if (this.health.report(error)) continue;
        failures++;
        this.reportError(error, 'poll', `Worker "${this.workerId}" could not poll queue "${queue}": ${(error as Error).message}`, undefined, 'warn');
        await sleep(Math.min(5_000, 100 * 2 ** Math.min(failures, 6)));
      }
    }
  }

  /** `promise`, or STOPPED as soon as stop() is called (the promise then settles unobserved). */
  private untilStopped<T>(promise: Promise<T>): Promise<T | typeof STOPPED> {
    promise.catch(() => undefined);
    return Promise.race([promise, this.stopRequested.promise.then((): typeof STOPPED => STOPPED)]);
  }

  private launch(claimed: ClaimedRun): void {
    this.lastClaimAt = Date.now();
    const executor = new RunExecutor(this, claimed);
    this.active.set(claimed.runId, executor);
    executor.execute().then(
      (next) => this.settle(executor, next),
      (error: Error) => {
        // Redis failed while ending the attempt: the run keeps its lease and is reaped later.
        this.reportError(error, 'finish', `Worker "${this.workerId}" could not finish run "${claimed.runId}": ${error?.message}`, claimed.runId);
        this.settle(executor, null);
      },
    );
  }

  private settle(executor: RunExecutor, next: ClaimedRun | null): void {
    // A newer attempt of the same run may hold the entry by now: leave it.
    if (this.active.get(executor.runId) === executor) this.active.delete(executor.runId);
    if (next) {
      this.launch(next);
      return;
    }
    this.wake(this.slotWaiters);
    if (this.active.size === 0) this.wake(this.idleWaiters);
  }

  private wake(waiters: Array<() => void>): void {
    const list = waiters.splice(0);
    for (const resolve of list) resolve();
  }

  /** The workflows this worker runs: those of its registry on the queues it serves. */
  private servedDefinitions() {
    return this.registry.list().filter((d) => this.queues.includes(versionQueue(d.queue, d.version)));
  }

  /** The workflow versions this worker runs. */
  private servedVersions(): Array<[string, number]> {
    return this.servedDefinitions().map((d) => [d.name, d.version]);
  }

  /**
   * Renews this worker's entries of its workflows' versions (they expire after three heartbeats),
   * and now and then warns once about each version of its workflows that no live worker serves
   * while runs started on it are not over: they stay queued until one starts.
   */
  private async presence(): Promise<void> {
    await this.scripts.presence(this.workerId, Date.now(), Date.now() + 3 * this.heartbeatMs, this.servedVersions());
    if (Date.now() - this.lastVersionCheckAt < Math.min(5_000, 10 * this.heartbeatMs)) return;
    this.lastVersionCheckAt = Date.now();
    for (const definition of this.servedDefinitions()) {
      const meta = await this.client.getWorkflowMeta(definition.name);
      for (const state of meta?.versions ?? []) {
        const key = `${definition.name} v${state.version}`;
        if (!state.noWorker) {
          if (state.workers.length) this.warnedVersions.delete(key);
          continue;
        }
        if (this.warnedVersions.has(key)) continue;
        this.warnedVersions.add(key);
        this.logger.warn(
          `Worker "${this.workerId}" found ${state.noWorker}: runs of workflow "${definition.name}" started on version ${state.version} are not over, and no live worker serves that version. They stay queued until a worker with version ${state.version} of "${definition.name}" starts; drain them before removing that code (countRuns({ workflow: "${definition.name}", version: ${state.version}, status: "queued" }), and "scheduled", "running").`,
        );
      }
    }
  }

  /** ExecutorHost: the queue of the latest registered version of a workflow. */
  latestQueue(workflow: string): Promise<string | null> {
    return this.client.redis.hget(this.client.keys.workflow(workflow), 'queue');
  }

  /** The claim left runs of `workflow` in `list`: they belong to another version than this worker's (warned once). */
  private leftForVersion(list: string, workflow: string): void {
    const key = `${workflow} left in ${list}`;
    if (this.warnedVersions.has(key)) return;
    this.warnedVersions.add(key);
    const listVersion = parseVersionQueue(list).version;
    this.logger.warn(
      `Worker "${this.workerId}" has workflow "${workflow}" at v${this.registry.get(workflow)?.version}, and claims from queue "${list}" for its other workflows, where runs of "${workflow}" v${listVersion} wait: it leaves them there for a worker with version ${listVersion}, and checks that queue once a second while they wait instead of waiting on it. Keep workflows of different versions on different queues to avoid this.`,
    );
  }

  /** ExecutorHost: a run of another version was claimed from `list` (a workflow defined after this worker started). */
  versionMismatch(list: string, workflow: string, runVersion: number, ownVersion: number): void {
    const skip = this.claimSkips.get(list) ?? [];
    if (!skip.includes(workflow)) this.claimSkips.set(list, [...skip, workflow]);
    const key = `${workflow} v${runVersion} here`;
    if (this.warnedVersions.has(key)) return;
    this.warnedVersions.add(key);
    this.logger.warn(
      `Worker "${this.workerId}" claimed a run of workflow "${workflow}" v${runVersion} but has v${ownVersion}: it hands such runs back for a worker with version ${runVersion}, and its claims leave them from now on. Keep workflows of different versions on different queues to avoid this.`,
    );
  }

  /** Called by executors after a run was scheduled: promote it when due, not on the next poll. */
  runScheduled(queue: string, dueAt: number): void {
    const delay = dueAt - this.clock.now();
    if (this.stopping || delay > this.blockTimeoutMs) return;
    this.once(Math.max(0, delay), () => this.scripts.promote(queue, this.clock.now(), PROMOTE_BATCH));
  }

  private async heartbeat(): Promise<void> {
    this.lastHeartbeatAt = Date.now();
    if (!this.active.size) return;
    await this.renewLeases(new Map<string, RunExecutor>(this.active));
  }

  /**
   * Renews the leases of `sent` until now + leaseMs (computed before the call is sent, so an
   * executor never counts on more than Redis holds) and tells each executor the outcome: a later
   * expiry, or the loss of its run. Only the attempt asked about: the run may have been claimed
   * again meanwhile.
   */
  private async renewLeases(sent: Map<string, RunExecutor>): Promise<void> {
    const pairs: string[] = [];
    for (const executor of sent.values()) pairs.push(executor.runId, executor.token);
    const until = Date.now() + this.leaseMs;
    const lost = new Set(await this.scripts.heartbeat(until, pairs));
    for (const [runId, executor] of sent) {
      if (this.active.get(runId) !== executor) continue;
      // A terminated run comes as "<id>\nterminated" (heartbeat-1.lua).
      if (lost.has(runId)) executor.lost('lost');
      else if (lost.has(`${runId}\nterminated`)) executor.lost('terminated');
      else executor.leaseRenewed(until);
    }
  }

  /** Renews one attempt's lease now: a step is about to run after the lease came close to expiring. */
  renewLease(executor: RunExecutor): Promise<void> {
    return this.renewLeases(new Map([[executor.runId, executor]]));
  }

  private async reap(): Promise<void> {
    // Leases that expired during an outage expired because no worker could renew them: give live
    // workers one lease to renew theirs before taking their runs.
    if (Date.now() - this.health.recoveredAt < this.leaseMs) return;
    // After the event loop was blocked, renew this worker's own leases before reaping: they
    // expired only because the heartbeat could not run, and their runs are still here.
    if (Date.now() - this.lastHeartbeatAt > this.heartbeatMs * 2) await this.heartbeat();
    const recovered = await this.scripts.reap(Date.now(), REAP_BATCH, this.maxRecoveries);
    if (recovered.length) this.logger.warn(`Recovered ${recovered.length} run(s) whose worker stopped renewing its lease: ${recovered.join(', ')}.`);
  }

  /**
   * Indexes the runs stored before the (workflow, status) index existed, in the background. One
   * worker of a prefix does it; the others look again when its lease may have run out, and take
   * over if it stopped before it was done. A Redis outage pauses it until Redis is back.
   */
  private async backfillRunIndex(): Promise<void> {
    while (!this.stopping) {
      try {
        const result = await this.client.backfillRunIndex({ stopped: () => this.stopping });
        if (result === 'built') this.logger.log(`Worker "${this.workerId}" indexed the stored runs of prefix "${this.client.keys.prefix}" by workflow and status.`);
        if (result !== 'busy') return;
      } catch (error) {
        if (!this.health.report(error)) {
          this.logger.error(
            `Worker "${this.workerId}" could not index the stored runs by workflow and status: ${(error as Error).message}. Lists by workflow and status may miss runs stored before this version; the next worker start tries again.`,
          );
          return;
        }
        await this.waitForRedis();
        continue;
      }
      await this.pause(RUN_INDEX_LEASE_MS);
    }
  }

  /** Waits `ms`, or less when the worker stops meanwhile. */
  private async pause(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))), this.stopRequested.promise]);
    clearTimeout(timer);
  }

  /** Promotes due scheduled runs of the served queues and fans out due events. */
  private async promoteAll(): Promise<void> {
    for (const queue of this.queues) await this.scripts.promote(queue, this.clock.now(), PROMOTE_BATCH);
    while ((await this.scripts.fireEvents(this.clock.now(), PROMOTE_BATCH)) === PROMOTE_BATCH && !this.timersStopped);
  }

  /** Deletes ended runs past retention, a bounded batch per call, until none is left. */
  private async cleanup(): Promise<void> {
    const cutoff = this.clock.now() - this.retentionMs;
    while ((await this.scripts.cleanup(cutoff, CLEANUP_BATCH)) === CLEANUP_BATCH && !this.timersStopped);
  }

  private once(delayMs: number, task: () => Promise<unknown>): void {
    if (this.timersStopped) return;
    // Workflow-time timers: a virtual clock that jumps ahead fires them at once.
    const cancel = this.clock.setTimer(delayMs, () => {
      this.timers.delete(cancel);
      // A Redis that stopped answering (paused, or a network partition) must not hang the timers.
      return withTimeout(task(), this.client.commandTimeoutMs, this.health.address).catch((error: Error) => {
        if (!this.health.report(error)) this.reportError(error, 'background', `Worker "${this.workerId}" background task failed: ${error.message}`, undefined, 'warn');
      });
    });
    this.timers.add(cancel);
  }

  /** Runs `task` again and again, each time after the delay it returned. */
  private loop(task: () => Promise<number>, delayMs = 0): void {
    this.once(delayMs, async () => {
      let next = 1_000;
      try {
        next = await task();
      } finally {
        if (!this.timersStopped) this.loop(task, next);
      }
    });
  }

  private every(intervalMs: number, task: () => Promise<unknown>): void {
    const tick = () =>
      this.once(intervalMs, async () => {
        try {
          await task();
        } finally {
          if (!this.timersStopped) tick();
        }
      });
    tick();
  }
}

/** Creates a worker, registers its workflows in Redis and starts executing runs. */
export async function startWorker(options: WorkerOptions): Promise<Worker> {
  const ownsClient = !options.client;
  assertKnownKeys('startWorker options', options, WORKER_OPTION_KEYS);
  const { redis, url, prefix, maxPayloadBytes, commandTimeoutMs, requireNoEviction, logger, tracing } = options;
  const client =
    options.client ??
    createClient({ redis, url, prefix, maxPayloadBytes, commandTimeoutMs, requireNoEviction, logger, tracing, registry: options.registry ?? getDefaultRegistry() });
  const worker = new Worker(client, ownsClient, options);
  try {
    await worker.start();
  } catch (error) {
    await worker.stop({ timeoutMs: 0 });
    throw error;
  }
  return worker;
}
