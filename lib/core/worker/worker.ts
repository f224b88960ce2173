import type { WorkflowClient } from '../client/workflow-client';
import type { Clock } from '../definition/clock';
import type { RedflowLogger } from '../definition/logger';
import type { CheckedStepRetry } from '../definition/option-checks';
import type { GuardedTracing } from '../definition/tracing';
import type { WorkflowRegistry } from '../definition/workflow';
import { closeConnection, duplicateConnection } from '../store/connection';
import type { Payloads } from '../store/payloads';
import { withTimeout, type RedisHealth } from '../store/redis-health';
import type { ClaimedRun, RedisConnection, RedisScripts } from '../store/redis-scripts';
import { BackgroundTimers } from './background-timers';
import { EventLoopWatchdog } from './event-loop-watchdog';
import type { LeasedAttempt } from './executor-host';
import type { HookRunner } from './hook-runner';
import { PROMOTE_BATCH, WorkerMaintenance, type MaintenanceHost } from './maintenance';
import { RunExecutor, type ExecutorHost } from './run-executor';
import type { StepMocks } from './step-runtime';
import { STOPPED, StopSignal } from './stop-signal';
import { VersionRouting } from './version-routing';
import {
  resolveStopTimeout,
  resolveWorkerOptions,
  type ResolvedWorkerOptions,
  type WorkerLiveness,
  type WorkerOptions,
  type WorkerStopOptions,
} from './worker-options';

export { WORKER_RUNTIME_KEYS, type WorkerLiveness, type WorkerOptions, type WorkerRuntimeOptions, type WorkerStopOptions } from './worker-options';

/** How often a list that cannot be blocked on (it holds runs left for another version, or its queue is paused) is claimed from. */
const POLL_MS = 1_000;

/**
 * Executes runs. Each served queue has a loop that claims while the worker has a free slot and
 * otherwise blocks on the queue's ready list (BLMOVE of the list onto itself: it wakes on a new run
 * without taking it, so a crash here strands nothing). Finishing a run claims the next one in the
 * same script, so a busy worker does not go back to the loop at all.
 *
 * Apart: its options (worker-options.ts), version routing (version-routing.ts), heartbeats, reaper,
 * promoter, presence, cleanup and cron ticks (maintenance.ts), the event-loop watchdog, and one
 * attempt of a run (run-executor.ts).
 */
export class Worker implements ExecutorHost, MaintenanceHost {
  readonly workerId: string;
  readonly app: string;
  readonly scripts: RedisScripts;
  readonly registry: WorkflowRegistry;
  /** The lists it claims from: its queues, and their version lists. */
  readonly queues: string[];
  readonly concurrency: number;
  readonly leaseMs: number;
  readonly maxPayloadBytes: number;
  readonly payloads: Payloads;
  readonly defaultStepRetries: CheckedStepRetry;
  readonly journalWarningBytes: number;
  readonly logger: RedflowLogger;
  readonly logFailedRuns: boolean;
  readonly health: RedisHealth;
  readonly hooks: HookRunner;
  /** Tracing, guarded: the worker's option, else its client's; undefined when off. */
  readonly tracing: GuardedTracing | undefined;
  /** Workflow time, the client's: due times and background timers. Leases use real time. */
  readonly clock: Clock;
  /** @internal Test step mocks (`nestjs-redflow/testing`); not a public option. */
  readonly stepMocks: StepMocks | undefined;
  /** @internal Its options, checked, with their defaults. */
  readonly settings: ResolvedWorkerOptions;
  /** @internal */
  readonly routing: VersionRouting;
  /** @internal */
  readonly timers: BackgroundTimers;
  /** @internal The attempts executing now, by run id. */
  readonly active = new Map<string, RunExecutor>();
  private readonly maintenance: WorkerMaintenance;
  private readonly watchdog: EventLoopWatchdog;
  private reserved = 0;
  private claims = 0;
  private stopped: Promise<void> | undefined;
  private readonly stopSignal = new StopSignal();
  private slotWaiters: Array<() => void> = [];
  private idleWaiters: Array<() => void> = [];
  private readonly blocking: RedisConnection[] = [];
  private subscriber: RedisConnection | undefined;
  private readonly loops: Promise<void>[] = [];
  /** When this worker last started a run it claimed (0: none yet). */
  private lastClaimAt = 0;
  private indexing: Promise<void> = Promise.resolve();

  constructor(
    readonly client: WorkflowClient,
    private readonly ownsClient: boolean,
    options: WorkerOptions,
  ) {
    const settings = (this.settings = resolveWorkerOptions(client, options));
    this.app = settings.app;
    this.workerId = settings.workerId;
    this.registry = settings.registry;
    this.queues = settings.queues;
    this.concurrency = settings.concurrency;
    this.leaseMs = settings.leaseMs;
    this.maxPayloadBytes = settings.maxPayloadBytes;
    this.payloads = client.context.payloads;
    this.defaultStepRetries = settings.defaultStepRetries;
    this.journalWarningBytes = settings.journalWarningBytes;
    this.logger = settings.logger;
    this.logFailedRuns = settings.logFailedRuns;
    this.hooks = settings.hooks;
    this.tracing = settings.tracing;
    this.stepMocks = settings.stepMocks;
    this.scripts = client.scripts;
    this.health = client.health;
    this.clock = client.clock;
    this.routing = new VersionRouting(this.queues, this.registry, this.workerId, this.logger);
    this.timers = new BackgroundTimers(this.clock, client.commandTimeoutMs, this.health, (error) =>
      this.reportError(error, 'background', `Worker "${this.workerId}" background task failed: ${error.message}`, undefined, 'warn'),
    );
    this.maintenance = new WorkerMaintenance(this);
    this.watchdog = new EventLoopWatchdog(this.workerId, this.leaseMs, this.logger);
  }

  /** Logs an error of the worker's own and hands it to the `onError` hook. */
  reportError(error: unknown, task: string, message: string, runId?: string, level: 'warn' | 'error' = 'error'): void {
    if (level === 'warn') this.logger.warn(message);
    else this.logger.error(message, (error as Error)?.stack);
    this.hooks.error(error, { workerId: this.workerId, task, runId });
  }

  /** True once stop() was called. */
  get stopping(): boolean {
    return this.stopSignal.stopping;
  }

  /** True while new runs may be claimed. */
  get claiming(): boolean {
    return !this.stopSignal.stopping;
  }

  /** ExecutorHost: per list, the workflows whose runs the claim leaves there. */
  get claimSkips(): ReadonlyMap<string, readonly string[]> {
    return this.routing.claimSkips;
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
      claiming: !this.stopSignal.stopping,
      stopped: this.timers.stopped,
      redisHealthy: this.health.healthy,
      activeRuns: this.active.size,
      concurrency: this.concurrency,
      leaseMs: this.leaseMs,
      lastHeartbeatAt: this.maintenance.lastHeartbeatAt,
      lastClaimAt: this.lastClaimAt || undefined,
    };
  }

  /** Registers the workflows, subscribes to cancellations and starts the queue loops and timers. */
  async start(): Promise<void> {
    await this.client.ready();
    await this.client.syncRegistry(this.registry, { owner: this.app, defaultMaxConcurrency: this.settings.defaultMaxConcurrency });
    await this.maintenance.writePresence();
    this.indexing = this.maintenance.backfillRunIndex();
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
    this.maintenance.start();
    this.watchdog.start();
  }

  /** Waits until Redis is healthy again, or the worker stops for good. */
  waitForRedis(): Promise<void> {
    return this.health.whenHealthy(() => this.timers.stopped);
  }

  /** ExecutorHost: an attempt found it no longer holds its run (the watchdog says why, if it knows). */
  leaseLost(runId: string, attemptStartedAt: number): void {
    this.watchdog.leaseLost(runId, attemptStartedAt);
  }

  /** ExecutorHost: renews one attempt's lease now. */
  renewLease(executor: LeasedAttempt): Promise<void> {
    return this.maintenance.renewLease(executor);
  }

  /** ExecutorHost: the queue of the latest registered version of a workflow. */
  latestQueue(workflow: string): Promise<string | null> {
    return this.client.context.registryQueries.workflowQueue(workflow);
  }

  /** ExecutorHost: a run of another version was claimed from `list` (a workflow defined after this worker started). */
  versionMismatch(list: string, workflow: string, runVersion: number, ownVersion: number): void {
    this.routing.versionMismatch(list, workflow, runVersion, ownVersion);
  }

  /** ExecutorHost: a run was scheduled (retry, wait): promote it when due, not on the next poll. */
  runScheduled(queue: string, dueAt: number): void {
    const delay = dueAt - this.clock.now();
    if (this.stopSignal.stopping || delay > this.settings.blockTimeoutMs) return;
    this.timers.once(Math.max(0, delay), () => this.scripts.promote(queue, this.clock.now(), PROMOTE_BATCH));
  }

  /** Waits `ms`, or less when the worker stops meanwhile. */
  pause(ms: number): Promise<void> {
    return this.stopSignal.pause(ms);
  }

  /**
   * Stops claiming, waits up to `timeoutMs` for running runs to finish, and leaves the rest to be
   * resumed by another worker once their leases expire. Safe to call more than once. Rejects with
   * ConfigurationError for an unknown option or a bad `timeoutMs`, without stopping.
   */
  stop(options: WorkerStopOptions = {}): Promise<void> {
    let timeoutMs: number;
    try {
      timeoutMs = resolveStopTimeout(options);
    } catch (error) {
      return Promise.reject(error);
    }
    this.stopped ??= this.shutdown(timeoutMs);
    return this.stopped;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    this.stopSignal.request();
    this.health.nudge();
    this.watchdog.stop();
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
    this.timers.stop();
    this.health.nudge();
    // The run-index backfill stops at its next batch; a batch stuck on an unreachable Redis is not
    // waited for (its lease lets the next worker take over).
    let indexTimer: NodeJS.Timeout | undefined;
    await Promise.race([this.indexing, new Promise<void>((resolve) => (indexTimer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(indexTimer);
    const cleanups = [
      // Its versions are no longer served here: the registry says so at once, not when they expire.
      async () =>
        this.health.healthy &&
        (await withTimeout(
          this.scripts.presence(this.workerId, Date.now(), 0, this.routing.servedVersions()),
          this.client.commandTimeoutMs,
          this.health.address,
        )),
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
    while (!this.stopSignal.stopping) {
      if (!this.health.healthy) {
        // Claiming now would start runs whose steps could not be stored.
        await this.health.whenHealthy(() => this.stopSignal.stopping);
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
        let paused = false;
        try {
          // While Redis is unreachable a call waits for the reconnection: stop() must not wait on it.
          // A claim answered after the stop is left to the reaper when its lease expires.
          const reply = await this.stopSignal.untilStopped(
            this.scripts.claim(queue, this.nextLeaseToken(), this.clock.now(), this.leaseMs, this.routing.claimSkips.get(queue) ?? []),
          );
          if (reply === STOPPED) break;
          if (reply && 'paused' in reply) paused = true;
          else if (reply && 'skipped' in reply) left = reply.skipped;
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
        if (paused) {
          // A paused queue: its runs stay in the list, so blocking on it would return at once.
          await this.stopSignal.pause(POLL_MS);
          continue;
        }
        const now = this.clock.now();
        const promoted = await this.stopSignal.untilStopped(this.scripts.promote(queue, now, PROMOTE_BATCH));
        if (promoted === STOPPED) break;
        const { moved, nextDue } = promoted;
        if (moved || this.stopSignal.stopping) continue;
        const { blockTimeoutMs } = this.settings;
        const waitMs = nextDue < 0 ? blockTimeoutMs : Math.min(blockTimeoutMs, nextDue - now);
        if (left !== undefined) {
          // The list holds runs left for another version: blocking on it would return at once.
          this.routing.leftForVersion(queue, left);
          await this.stopSignal.pause(Math.min(waitMs, POLL_MS));
        } else if (waitMs >= 1) {
          // A connection that is reconnecting when it is closed never answers: stop() must not wait on it.
          await Promise.race([blocking.blmove(ready, ready, 'RIGHT', 'RIGHT', waitMs / 1000), this.stopSignal.promise]);
        }
      } catch (error) {
        if (this.stopSignal.stopping) break;
        if (this.health.report(error)) continue;
        failures++;
        this.reportError(error, 'poll', `Worker "${this.workerId}" could not poll queue "${queue}": ${(error as Error).message}`, undefined, 'warn');
        await new Promise((resolve) => setTimeout(resolve, Math.min(5_000, 100 * 2 ** Math.min(failures, 6))));
      }
    }
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
}
