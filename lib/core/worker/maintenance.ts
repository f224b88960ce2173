import { hostname } from 'node:os';

import type { WorkflowClient } from '../client/workflow-client';
import { parseVersionQueue } from '../definition/option-checks';
import type { WorkerInfo } from '../definition/stats-types';
import type { RedisHealth } from '../store/redis-health';
import type { RedisScripts } from '../store/redis-scripts';
import { RUN_INDEX_LEASE_MS } from '../store/run-list-queries';
import type { BackgroundTimers } from './background-timers';
import { fireDueCrons } from './cron-ticker';
import type { LeasedAttempt } from './executor-host';
import type { RunExecutor } from './run-executor';
import type { VersionRouting } from './version-routing';
import type { ResolvedWorkerOptions } from './worker-options';

/** Due scheduled runs (or events) moved per script call. */
export const PROMOTE_BATCH = 100;
const REAP_BATCH = 100;
const CLEANUP_BATCH = 500;

/** What maintenance needs from its worker. */
export interface MaintenanceHost {
  readonly client: WorkflowClient;
  readonly scripts: RedisScripts;
  readonly health: RedisHealth;
  readonly settings: ResolvedWorkerOptions;
  readonly routing: VersionRouting;
  readonly timers: BackgroundTimers;
  /** The attempts executing now, by run id. */
  readonly active: ReadonlyMap<string, RunExecutor>;
  /** True once stop() was called. */
  readonly stopping: boolean;
  waitForRedis(): Promise<void>;
  /** Waits `ms`, or less when the worker stops meanwhile. */
  pause(ms: number): Promise<void>;
  reportError(error: unknown, task: string, message: string): void;
}

/**
 * A worker's work besides running runs, each on its own timer: heartbeats (lease renewal),
 * presence of its workflow versions, the reaper of expired leases, the promoter of due
 * scheduled runs and events, retention cleanup, cron ticks, and the run-index backfill.
 */
export class WorkerMaintenance {
  /** When the heartbeat timer last ran (ms, real time). */
  lastHeartbeatAt = Date.now();
  private lastVersionCheckAt = 0;
  private readonly startedAt = Date.now();

  constructor(private readonly worker: MaintenanceHost) {}

  /**
   * Starts the timers. A heartbeat runs even while Redis refuses writes (its script keeps leases
   * alive on a full Redis); the other tasks wait until Redis is healthy.
   */
  start(): void {
    const { timers, settings, health, client } = this.worker;
    timers.every(settings.heartbeatMs, () => this.heartbeat());
    timers.every(settings.heartbeatMs, () => this.whenHealthy(() => this.presence()));
    timers.every(settings.reaperIntervalMs, () => this.whenHealthy(() => this.reap()));
    timers.every(settings.blockTimeoutMs, () => this.whenHealthy(() => this.promoteAll()));
    timers.every(settings.cleanupIntervalMs, () => this.whenHealthy(() => this.cleanup()));
    // Where a cron tick fires: cron-ticker.ts, once per tick across every worker of the prefix.
    const report = (error: unknown, message: string) => this.worker.reportError(error, 'cron', message);
    timers.loop(async () => (health.healthy ? fireDueCrons(client, settings.registry, report) : 1_000));
  }

  /** Runs a background task only while Redis is healthy. */
  private async whenHealthy(task: () => Promise<unknown>): Promise<void> {
    if (this.worker.health.healthy) await task();
  }

  /** Renews the leases of every attempt executing now. */
  async heartbeat(): Promise<void> {
    this.lastHeartbeatAt = Date.now();
    if (!this.worker.active.size) return;
    await this.renewLeases(new Map<string, RunExecutor>(this.worker.active));
  }

  /** Renews one attempt's lease now: a step is about to run after the lease came close to expiring. */
  renewLease(executor: LeasedAttempt): Promise<void> {
    return this.renewLeases(new Map([[executor.runId, executor]]));
  }

  /**
   * Renews the leases of `sent` until now + leaseMs (computed before the call is sent, so an
   * executor never counts on more than Redis holds) and tells each executor the outcome: a later
   * expiry, or the loss of its run. Only the attempt asked about: the run may have been claimed
   * again meanwhile.
   */
  private async renewLeases(sent: ReadonlyMap<string, LeasedAttempt>): Promise<void> {
    const pairs: string[] = [];
    for (const executor of sent.values()) pairs.push(executor.runId, executor.token);
    const until = Date.now() + this.worker.settings.leaseMs;
    const lost = new Set(await this.worker.scripts.heartbeat(until, pairs));
    for (const [runId, executor] of sent) {
      if (this.worker.active.get(runId) !== executor) continue;
      // A terminated run comes as "<id>\nterminated" (heartbeat-1.lua).
      if (lost.has(runId)) executor.lost('lost');
      else if (lost.has(`${runId}\nterminated`)) executor.lost('terminated');
      else executor.leaseRenewed(until);
    }
  }

  /**
   * Renews this worker's entries of its workflows' versions (they expire after three heartbeats),
   * and now and then warns once about each version of its workflows that no live worker serves
   * while runs started on it are not over: they stay queued until one starts.
   */
  /** Writes this worker's presence until 3 heartbeats from now: the versions it serves, and its entry in the workers hash. */
  writePresence(): Promise<void> {
    const { scripts, settings, routing, active } = this.worker;
    const now = Date.now();
    const versions = routing.servedVersions();
    const info: WorkerInfo = {
      workerId: settings.workerId,
      host: hostname(),
      pid: process.pid,
      queues: [...new Set(settings.queues.map((q) => parseVersionQueue(q).queue))],
      versions: versions.map(([workflow, version]) => ({ workflow, version })),
      concurrency: settings.concurrency,
      active: active.size,
      startedAt: this.startedAt,
      heartbeatAt: now,
      expiresAt: now + 3 * settings.heartbeatMs,
    };
    return scripts.presence(settings.workerId, now, info.expiresAt, versions, JSON.stringify(info));
  }

  async presence(): Promise<void> {
    const { settings, routing, client } = this.worker;
    await this.writePresence();
    if (Date.now() - this.lastVersionCheckAt < Math.min(5_000, 10 * settings.heartbeatMs)) return;
    this.lastVersionCheckAt = Date.now();
    for (const definition of routing.servedDefinitions()) {
      const meta = await client.getWorkflowMeta(definition.name);
      for (const state of meta?.versions ?? []) {
        const key = `${definition.name} v${state.version}`;
        if (!state.noWorker) {
          if (state.workers.length) routing.forget(key);
          continue;
        }
        routing.warnOnce(
          key,
          `Worker "${settings.workerId}" found ${state.noWorker}: runs of workflow "${definition.name}" started on version ${state.version} are not over, and no live worker serves that version. They stay queued until a worker with version ${state.version} of "${definition.name}" starts; drain them before removing that code (countRuns({ workflow: "${definition.name}", version: ${state.version}, status: "queued" }), and "scheduled", "running").`,
        );
      }
    }
  }

  /** Recovers runs whose worker stopped renewing their lease (the reaper). */
  private async reap(): Promise<void> {
    const { health, settings, scripts } = this.worker;
    // Leases that expired during an outage expired because no worker could renew them: give live
    // workers one lease to renew theirs before taking their runs.
    if (Date.now() - health.recoveredAt < settings.leaseMs) return;
    // After the event loop was blocked, renew this worker's own leases before reaping: they
    // expired only because the heartbeat could not run, and their runs are still here.
    if (Date.now() - this.lastHeartbeatAt > settings.heartbeatMs * 2) await this.heartbeat();
    const recovered = await scripts.reap(Date.now(), REAP_BATCH, settings.maxRecoveries);
    if (recovered.length) settings.logger.warn(`Recovered ${recovered.length} run(s) whose worker stopped renewing its lease: ${recovered.join(', ')}.`);
  }

  /** Promotes due scheduled runs of the served queues and fans out due events. */
  private async promoteAll(): Promise<void> {
    const { scripts, client, settings, timers } = this.worker;
    for (const queue of settings.queues) await scripts.promote(queue, client.clock.now(), PROMOTE_BATCH);
    while ((await scripts.fireEvents(client.clock.now(), PROMOTE_BATCH)) >= PROMOTE_BATCH && !timers.stopped);
  }

  /** Deletes ended runs past retention, a bounded batch per call, until none is left. */
  private async cleanup(): Promise<void> {
    const { scripts, client, settings, timers } = this.worker;
    const cutoff = client.clock.now() - settings.retentionMs;
    while ((await scripts.cleanup(cutoff, CLEANUP_BATCH)) === CLEANUP_BATCH && !timers.stopped);
  }

  /**
   * Indexes the runs stored before the (workflow, status) index existed, in the background. One
   * worker of a prefix does it; the others look again when its lease may have run out, and take
   * over if it stopped before it was done. A Redis outage pauses it until Redis is back.
   */
  async backfillRunIndex(): Promise<void> {
    const { client, health, settings } = this.worker;
    while (!this.worker.stopping) {
      try {
        const result = await client.backfillRunIndex({ stopped: () => this.worker.stopping });
        if (result === 'built')
          settings.logger.log(`Worker "${settings.workerId}" indexed the stored runs of prefix "${client.keys.prefix}" by workflow and status.`);
        if (result !== 'busy') return;
      } catch (error) {
        if (!health.report(error)) {
          settings.logger.error(
            `Worker "${settings.workerId}" could not index the stored runs by workflow and status: ${(error as Error).message}. Lists by workflow and status may miss runs stored before this version; the next worker start tries again.`,
          );
          return;
        }
        await this.worker.waitForRedis();
        continue;
      }
      await this.worker.pause(RUN_INDEX_LEASE_MS);
    }
  }
}
