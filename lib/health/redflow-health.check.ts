import { ConfigurationError, type Duration, type QueueStats, type WorkerLiveness, type WorkflowClient } from '../core';
import { assertKnownKeys, checkInteger, checkResourceName, optionKeys, renamedDuration } from '../core/definition/option-checks';

/** Options of a Redflow health check (`RedflowHealthIndicator.isHealthy(key, options)`). */
export interface RedflowHealthOptions {
  /**
   * How long the check may wait for Redis: a Redis that has not answered the ping and the queue
   * counts by then is reported down, so a health endpoint never hangs on it.
   * @default '1s'
   */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration such as `'1s'`, or ms); it goes in the next minor version. */
  timeoutMs?: number;
  /** Down when a queue holds more queued runs than this. @default no limit */
  maxQueued?: number;
  /** Down when the oldest queued run of a queue has waited longer than this (`'5m'`, or ms). @default no limit */
  maxOldestQueuedAge?: Duration;
  /** @deprecated Use `maxOldestQueuedAge` (a duration such as `'5m'`, or ms); it goes in the next minor version. */
  maxOldestQueuedAgeMs?: number;
  /**
   * The queues to report and check.
   * @default the queues of the workflows registered in Redis
   */
  queues?: string[];
}

const HEALTH_OPTION_KEYS = optionKeys<RedflowHealthOptions>()(['timeout', 'timeoutMs', 'maxQueued', 'maxOldestQueuedAge', 'maxOldestQueuedAgeMs', 'queues']);

/** This app's worker as a health check reports it. */
export interface WorkerHealth {
  workerId: string;
  queues: string[];
  /** True while it claims runs and its heartbeat timer ran within its lease. */
  alive: boolean;
  activeRuns: number;
  concurrency: number;
  /** Since its heartbeat timer last ran, in ms. */
  heartbeatAgeMs: number;
  /** Since it last started a claimed run, in ms; null when it has not claimed one yet. */
  lastClaimAgeMs: number | null;
}

/** One queue as a health check reports it. */
export interface QueueHealth {
  queued: number;
  scheduled: number;
  running: number;
  /** How long its oldest queued run has waited since it became claimable, in ms (null: none). */
  oldestQueuedAgeMs: number | null;
  /** Set while the queue is paused (`WorkflowQueues.pause`): its `maxQueued` and `maxOldestQueuedAge` limits are not checked then. */
  paused?: true;
}

/** What a health check reports, up or down. */
export interface RedflowHealthDetails {
  redis: { up: boolean; address: string; latencyMs?: number; error?: string };
  workers: WorkerHealth[];
  queues: Record<string, QueueHealth>;
  /** Why it is down, one sentence each; empty when up. */
  problems: string[];
}

/** Options with their defaults merged. */
function resolveOptions(options: RedflowHealthOptions): { timeoutMs: number; maxQueued?: number; maxOldestQueuedAgeMs?: number; queues?: string[] } {
  if (typeof options !== 'object' || options === null)
    throw new ConfigurationError("Redflow health options must be an object, like { timeout: '1s', maxQueued: 1000 }.");
  assertKnownKeys('Redflow health options', options, HEALTH_OPTION_KEYS);
  const { maxQueued, queues } = options;
  const label = (key: string) => `Redflow health option "${key}"`;
  if (queues !== undefined && !Array.isArray(queues))
    throw new ConfigurationError(`Redflow health option "queues" must be an array of queue names, like ['default'], got ${typeof queues}.`);
  return {
    timeoutMs: renamedDuration(options, { name: 'timeout', deprecated: 'timeoutMs', label, timer: true }) ?? 1_000,
    maxQueued: maxQueued === undefined ? undefined : checkInteger(maxQueued, 'Redflow health option "maxQueued"', 0, Number.MAX_SAFE_INTEGER),
    maxOldestQueuedAgeMs: renamedDuration(options, { name: 'maxOldestQueuedAge', deprecated: 'maxOldestQueuedAgeMs', label, allowZero: true }),
    queues: queues?.map((q, i) => checkResourceName(q, `Redflow health option "queues[${i}]"`)),
  };
}

/** `promise`, or a rejection with `message` once `ms` passed. */
function within<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  promise.catch(() => undefined);
  return Promise.race([promise, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(message)), ms)))]).finally(() =>
    clearTimeout(timer),
  );
}

/**
 * Checks Redis (a ping and its latency), this app's workers (alive, age of their last claim) and the
 * backlog of each queue against the thresholds. Framework-free: the Terminus indicator reports what
 * it returns. Never rejects for a Redis failure and never waits longer than `timeoutMs` for Redis;
 * rejects with `ConfigurationError` for bad options.
 */
export async function checkRedflowHealth(
  client: WorkflowClient,
  workers: readonly WorkerLiveness[],
  options: RedflowHealthOptions = {},
): Promise<{ healthy: boolean; details: RedflowHealthDetails }> {
  const settings = resolveOptions(options);
  const problems: string[] = [];
  const now = Date.now();
  const workerHealth = workers.map((w): WorkerHealth => {
    const heartbeatAgeMs = Math.max(0, now - w.lastHeartbeatAt);
    const alive = w.claiming && !w.stopped && heartbeatAgeMs <= w.leaseMs;
    if (!w.claiming || w.stopped) problems.push(`Worker "${w.workerId}" is stopped and claims no runs.`);
    else if (!alive)
      problems.push(
        `Worker "${w.workerId}" has not run its heartbeat for ${heartbeatAgeMs} ms, more than its lease (${w.leaseMs} ms): its timers are not running, and its runs may be taken over by another worker.`,
      );
    return {
      workerId: w.workerId,
      queues: w.queues,
      alive,
      activeRuns: w.activeRuns,
      concurrency: w.concurrency,
      heartbeatAgeMs,
      lastClaimAgeMs: w.lastClaimAt === undefined ? null : Math.max(0, now - w.lastClaimAt),
    };
  });

  const address = client.health.address;
  const redis: RedflowHealthDetails['redis'] = { up: false, address };
  const queues: Record<string, QueueHealth> = {};
  const deadline = now + settings.timeoutMs;
  const timeoutMessage = `Redis at ${address} did not answer within ${settings.timeoutMs} ms.`;
  let stats: QueueStats[] = [];
  try {
    const started = performance.now();
    await within(client.redis.ping(), settings.timeoutMs, timeoutMessage);
    redis.latencyMs = Math.round((performance.now() - started) * 100) / 100;
    redis.up = true;
    stats = await within(client.getQueueStats(settings.queues ? { queues: settings.queues } : {}), Math.max(1, deadline - Date.now()), timeoutMessage);
  } catch (error) {
    redis.error = (error as Error)?.message ?? String(error);
    problems.push(
      redis.up
        ? `Could not read the queues from Redis at ${address}: ${redis.error}`
        : redis.error.startsWith('Redis at')
          ? redis.error
          : `Redis at ${address} is unreachable: ${redis.error}`,
    );
  }

  const clockNow = client.clock.now();
  for (const s of stats) {
    const oldestQueuedAgeMs = s.oldestQueuedAt === null ? null : Math.max(0, clockNow - s.oldestQueuedAt);
    queues[s.queue] = { queued: s.queued, scheduled: s.scheduled, running: s.running, oldestQueuedAgeMs, ...(s.paused && { paused: true as const }) };
    // A paused queue fills up on purpose: it is reported, not held against the app's health.
    if (s.paused) continue;
    if (settings.maxQueued !== undefined && s.queued > settings.maxQueued) {
      problems.push(`Queue "${s.queue}" has ${s.queued} queued runs, more than maxQueued (${settings.maxQueued}).`);
    }
    if (settings.maxOldestQueuedAgeMs !== undefined && oldestQueuedAgeMs !== null && oldestQueuedAgeMs > settings.maxOldestQueuedAgeMs) {
      problems.push(
        `The oldest queued run of queue "${s.queue}" has waited ${oldestQueuedAgeMs} ms, more than maxOldestQueuedAgeMs (${settings.maxOldestQueuedAgeMs} ms).`,
      );
    }
  }
  return { healthy: problems.length === 0, details: { redis, workers: workerHealth, queues, problems } };
}
