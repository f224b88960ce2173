import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

import type { ClientOptions, WorkflowClient } from '../client/workflow-client';
import type { Duration } from '../definition/duration-format';
import { stderrLogger, type RedflowLogger } from '../definition/logger';
import {
  assertKnownKeys,
  checkInteger,
  checkResourceName,
  checkStepRetry,
  checkUserName,
  DEFAULT_STEP_RETRIES,
  optionKeys,
  renamedDuration,
  type CheckedStepRetry,
} from '../definition/option-checks';
import type { StepRetryPolicy } from '../definition/step-types';
import { checkTracingOption, GuardedTracing, type RedflowTracing } from '../definition/tracing';
import type { WorkerHooks } from '../definition/worker-hooks';
import type { WorkflowRegistry } from '../definition/workflow';
import { ConfigurationError } from '../errors';
import type { ConnectionOptions } from '../store/connection';
import { checkHooks, HookRunner } from './hook-runner';
import type { StepMocks } from './step-runtime';
import { versionQueues } from './version-routing';

/*
 * The options of a worker: what `startWorker` and `worker.stop()` accept, and the settings a
 * worker runs with once they are checked and their defaults applied (`resolveWorkerOptions`).
 */

/** Timing of a worker. */
export interface WorkerRuntimeOptions {
  /** How long a run stays claimed without a heartbeat before another worker may take it. @default '10s' */
  leaseDuration?: Duration;
  /** @deprecated Use `leaseDuration` (a duration such as `'10s'`, or ms); it goes in the next minor version. */
  leaseMs?: number;
  /** How often leases are renewed. @default a third of `leaseDuration` */
  heartbeatInterval?: Duration;
  /** @deprecated Use `heartbeatInterval` (a duration such as `'3s'`, or ms); it goes in the next minor version. */
  heartbeatMs?: number;
  /** How often expired leases are looked for. @default '1s' */
  reaperInterval?: Duration;
  /** @deprecated Use `reaperInterval` (a duration such as `'1s'`, or ms); it goes in the next minor version. */
  reaperIntervalMs?: number;
  /** Longest blocking wait for new runs before due scheduled runs are checked again. @default '1s' */
  blockTimeout?: Duration;
  /** @deprecated Use `blockTimeout` (a duration such as `'1s'`, or ms); it goes in the next minor version. */
  blockTimeoutMs?: number;
  /** How often ended runs past retention are deleted. @default '1m' */
  cleanupInterval?: Duration;
  /** @deprecated Use `cleanupInterval` (a duration such as `'1m'`, or ms); it goes in the next minor version. */
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
  /** maxConcurrency of workflows that do not set one. `Infinity` for no limit. @default Infinity (bounded by the workers' concurrency) */
  defaultMaxConcurrency?: number;
  /**
   * How steps retry in workflows that set no `stepRetries`, unless a step sets its own `retries`.
   * `{ maxAttempts: 1 }` turns step retries off.
   * @default { maxAttempts: 3 } (exponential backoff: 1 s, then 2 s)
   */
  defaultStepRetries?: StepRetryPolicy;
  /**
   * A run whose journal (step records and other stored values) grows past this many bytes is told
   * once: a warning naming the run, and the `onJournalLarge` hook (`@OnRunEvent('run.journal-large')`).
   * `Infinity` turns it off.
   * @default 1048576 (1 MiB)
   */
  journalWarningBytes?: number;
  /**
   * Ended runs are deleted this long after they finished (`'30d'`, `'12h'`, or ms).
   * @default '30d', or process.env.REDFLOW_RUN_RETENTION_DAYS days
   */
  retention?: Duration;
  /** @deprecated Use `retention` (a duration such as `'30d'`); `retentionDays` goes in the next minor version. */
  retentionDays?: number;
  /** For the client the worker creates (no `client` given): see ClientOptions. @default '10s' */
  commandTimeout?: Duration;
  /** @deprecated Use `commandTimeout` (a duration such as `'10s'`, or ms); it goes in the next minor version. */
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
  /**
   * Logs one line through `logger.error` for each run that ends `failed` (for good: no attempt
   * left) or `compensation_failed` (a compensation failed after its retries: the run needs a
   * person) on this worker: the workflow, the run id and the error. `false` turns it off, when
   * your `onRunFailed` hook (`@OnRunEvent('run.failed')`) or alerts already tell you.
   * @default true
   */
  logFailedRuns?: boolean;
  /** @internal Step mocks of `nestjs-redflow/testing`; not for production use. */
  stepMocks?: StepMocks;
}

/** Keys of `WorkerRuntimeOptions` (the worker's `runtime` option). */
export const WORKER_RUNTIME_KEYS = optionKeys<WorkerRuntimeOptions>()([
  'leaseDuration',
  'leaseMs',
  'heartbeatInterval',
  'heartbeatMs',
  'reaperInterval',
  'reaperIntervalMs',
  'blockTimeout',
  'blockTimeoutMs',
  'cleanupInterval',
  'cleanupIntervalMs',
  'maxRecoveries',
]);

/** Options of `worker.stop()`. */
export interface WorkerStopOptions {
  /**
   * How long running runs may take to finish; what is still running then is left to be resumed
   * by another worker once its lease expires. 0 leaves them at once.
   * @default '10s'
   */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration such as `'10s'`, or ms); it goes in the next minor version. */
  timeoutMs?: number;
}

/** Keys of `WorkerStopOptions`. */
export const WORKER_STOP_OPTION_KEYS = optionKeys<WorkerStopOptions>()(['timeout', 'timeoutMs']);

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
  'defaultStepRetries',
  'journalWarningBytes',
  'retention',
  'retentionDays',
  'commandTimeout',
  'commandTimeoutMs',
  'requireNoEviction',
  'hooks',
  'tracing',
  'logFailedRuns',
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

const DAY_MS = 86_400_000;

/** A worker's settings: its options checked, with their defaults applied. */
export interface ResolvedWorkerOptions {
  app: string;
  /** `<app>:<host>:<pid>:<random>`: unique per worker; the prefix of its lease tokens. */
  workerId: string;
  registry: WorkflowRegistry;
  /** The lists it claims from: its queues, and their version lists (see versionQueues). */
  queues: string[];
  concurrency: number;
  leaseMs: number;
  heartbeatMs: number;
  reaperIntervalMs: number;
  maxRecoveries: number;
  blockTimeoutMs: number;
  cleanupIntervalMs: number;
  retentionMs: number;
  defaultMaxConcurrency: number | undefined;
  /** Step retries of workflows that set no `stepRetries`, checked. */
  defaultStepRetries: CheckedStepRetry;
  journalWarningBytes: number;
  maxPayloadBytes: number;
  logger: RedflowLogger;
  logFailedRuns: boolean;
  hooks: HookRunner;
  /** The worker's tracing option, else its client's; undefined when off. */
  tracing: GuardedTracing | undefined;
  stepMocks: StepMocks | undefined;
}

/** The default of `journalWarningBytes`: 1 MiB. */
export const DEFAULT_JOURNAL_WARNING_BYTES = 1_048_576;

/** Checks `options` (ConfigurationError naming the option and the fix) and applies the defaults. */
export function resolveWorkerOptions(client: WorkflowClient, options: WorkerOptions): ResolvedWorkerOptions {
  assertKnownKeys('startWorker options', options, WORKER_OPTION_KEYS);
  if (!options.app) throw new ConfigurationError('startWorker needs an app: a stable id of the app, used as the owner of its workflows in Redis.');
  const app = checkUserName(options.app, 'startWorker app');
  const registry = options.registry ?? client.registry;
  if (options.queues !== undefined && !Array.isArray(options.queues)) {
    throw new ConfigurationError(`startWorker queues must be an array of queue names, got ${typeof options.queues}.`);
  }
  if (options.client) {
    const ignored = (['redis', 'url', 'prefix', 'commandTimeout', 'commandTimeoutMs', 'requireNoEviction'] as const).filter((k) => options[k] !== undefined);
    if (ignored.length) {
      throw new ConfigurationError(
        `startWorker got both client and ${ignored.join(', ')}: the client already has its connection and settings. Set ${ignored.join(', ')} on the client, or pass no client.`,
      );
    }
  }
  const queues = (options.queues ?? registry.queues()).map((q, i) => checkResourceName(q, `startWorker queues[${i}]`));
  if (!queues.length) queues.push('default');
  const concurrency = checkInteger(options.concurrency ?? 1, 'Worker concurrency', 1, 100_000);
  const runtime = options.runtime ?? {};
  assertKnownKeys('startWorker runtime options', runtime, WORKER_RUNTIME_KEYS);
  const duration = (name: keyof WorkerRuntimeOptions, deprecated: keyof WorkerRuntimeOptions, fallback: number) =>
    renamedDuration(runtime, { name, deprecated, label: (key) => `runtime.${key}`, timer: true }) ?? fallback;
  const leaseMs = duration('leaseDuration', 'leaseMs', 10_000);
  const heartbeatMs = duration('heartbeatInterval', 'heartbeatMs', Math.max(50, Math.floor(leaseMs / 3)));
  if (heartbeatMs >= leaseMs) {
    throw new ConfigurationError(
      `runtime.heartbeatInterval (${heartbeatMs} ms) must be shorter than runtime.leaseDuration (${leaseMs} ms), or every lease expires before it is renewed; a third of leaseDuration is the default.`,
    );
  }
  const reaperIntervalMs = duration('reaperInterval', 'reaperIntervalMs', 1_000);
  const maxRecoveries = checkInteger(runtime.maxRecoveries ?? 5, 'runtime.maxRecoveries', 1, 1_000_000);
  const blockTimeoutMs = duration('blockTimeout', 'blockTimeoutMs', 1_000);
  const cleanupIntervalMs = duration('cleanupInterval', 'cleanupIntervalMs', 60_000);
  const retentionMs = resolveRetention(options);
  if (options.defaultMaxConcurrency !== undefined && options.defaultMaxConcurrency !== Infinity) {
    checkInteger(options.defaultMaxConcurrency, 'defaultMaxConcurrency', 1, 1_000_000);
  }
  const maxPayloadBytes = checkInteger(options.maxPayloadBytes ?? client.maxPayloadBytes, 'maxPayloadBytes', 1, 512 * 1024 * 1024);
  const logger = options.logger ?? client.logger ?? stderrLogger;
  if (options.logFailedRuns !== undefined && typeof options.logFailedRuns !== 'boolean') {
    throw new ConfigurationError(`startWorker logFailedRuns must be true or false, got ${typeof options.logFailedRuns}.`);
  }
  const hooks = new HookRunner(checkHooks(options.hooks), logger);
  const tracing = checkTracingOption(options.tracing, 'startWorker option');
  return {
    app,
    workerId: `${app}:${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`,
    registry,
    queues: versionQueues(queues, registry),
    concurrency,
    leaseMs,
    heartbeatMs,
    reaperIntervalMs,
    maxRecoveries,
    blockTimeoutMs,
    cleanupIntervalMs,
    retentionMs,
    defaultMaxConcurrency: options.defaultMaxConcurrency,
    defaultStepRetries: checkStepRetry(options.defaultStepRetries ?? DEFAULT_STEP_RETRIES, 'startWorker defaultStepRetries'),
    journalWarningBytes:
      options.journalWarningBytes === undefined || options.journalWarningBytes === Infinity
        ? (options.journalWarningBytes ?? DEFAULT_JOURNAL_WARNING_BYTES)
        : checkInteger(options.journalWarningBytes, 'startWorker journalWarningBytes', 1, Number.MAX_SAFE_INTEGER),
    maxPayloadBytes,
    logger,
    logFailedRuns: options.logFailedRuns ?? true,
    hooks,
    tracing: tracing ? new GuardedTracing(tracing, logger) : client.tracing,
    stepMocks: options.stepMocks,
  };
}

/** The `timeout` of `worker.stop()` in ms, checked (ConfigurationError), 10 s by default. */
export function resolveStopTimeout(options: WorkerStopOptions): number {
  assertKnownKeys('worker.stop options', options, WORKER_STOP_OPTION_KEYS);
  return renamedDuration(options, { name: 'timeout', deprecated: 'timeoutMs', label: (key) => `worker.stop ${key}`, allowZero: true, timer: true }) ?? 10_000;
}

/**
 * The worker's `retention` in ms: the option (or its deprecated `retentionDays`), else
 * `REDFLOW_RUN_RETENTION_DAYS` days, else 30 days; at most 10 years.
 */
function resolveRetention(options: WorkerOptions): number {
  const given = renamedDuration(options, { name: 'retention', deprecated: 'retentionDays', unitMs: DAY_MS, label: (key) => `startWorker ${key}` });
  if (given !== undefined) return given;
  const env = process.env.REDFLOW_RUN_RETENTION_DAYS;
  if (env === undefined) return 30 * DAY_MS;
  const days = Number(env);
  if (!(days > 0 && days <= 3650)) {
    throw new ConfigurationError(`REDFLOW_RUN_RETENTION_DAYS must be a number of days > 0 and at most 3650, got ${JSON.stringify(env)}.`);
  }
  return days * DAY_MS;
}
