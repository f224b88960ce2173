import { ConfigurationError, type Clock, type Duration, type EventStreamOptions, type StepRetryPolicy, type WorkerRuntimeOptions } from '../core';
import {
  assertKnownKeys,
  checkPositiveCount,
  checkResourceName,
  checkStepRetry,
  checkUserName,
  describeValue,
  optionKeys,
  renamedDuration,
} from '../core/definition/option-checks';
import type { PayloadCodec } from '../core/definition/payload-codec';
import { checkEventStreamOption } from '../core/definition/run-events';
import { checkTracingOption, type RedflowTracing } from '../core/definition/tracing';
import type { Cluster, Redis, RedisOptions } from '../core/store/ioredis-types';
import type { StepMocks } from '../core/worker/step-runtime';
import { WORKER_RUNTIME_KEYS } from '../core/worker/worker';
import { DASHBOARD_OPTION_KEYS, type DashboardOptions } from '../dashboard/dashboard-options';

/** Worker settings of `RedflowModule`. */
export interface RedflowWorkerOptions {
  /** @default true */
  enabled?: boolean;
  /** @default the queues of the discovered workflows */
  queues?: string[];
  /** Runs executed at once by this app. @default 10 */
  concurrency?: number;
  runtime?: WorkerRuntimeOptions;
  /** Ended runs are deleted this long after they finished. @default '30d', or process.env.REDFLOW_RUN_RETENTION_DAYS days */
  retention?: Duration;
  /** @deprecated Use `retention` (a duration such as `'30d'`); `retentionDays` goes in the next minor version. */
  retentionDays?: number;
  /**
   * Logs one error line (Nest's Logger, context `Redflow`) for each run that ends `failed` or
   * `compensation_failed` on this app's worker: workflow, run id, error. `false` turns it off.
   * @default true
   */
  logFailedRuns?: boolean;
  /**
   * A run whose journal (step records and values) grows past this many bytes is told once: a
   * warning and `@OnRunEvent('run.journal-large')`. `Infinity` turns it off. @default 1048576 (1 MiB)
   */
  journalWarningBytes?: number;
}

/** Checks of the Redis server made at startup. */
export interface RedflowRedisOptions {
  /** Fail at startup, instead of warning, when Redis's maxmemory-policy is not noeviction. @default false */
  requireNoEviction?: boolean;
  /**
   * With Redis unreachable at startup, `true` starts the app without it: one error line is
   * logged, the workflows are registered and the worker starts once Redis answers (client calls
   * reject with `RedisUnavailableError` meanwhile, and the health indicator says so). `false`
   * logs one error line and fails the app's bootstrap with `RedisUnavailableError`.
   * @default true
   */
  waitAtStartup?: boolean;
}

/** Defaults for workflows that do not set them. */
export interface RedflowWorkflowDefaults {
  /** Most runs of a workflow running at once across the fleet. @default Infinity (bounded by the workers' concurrency) */
  maxConcurrency?: number;
  /**
   * How steps retry in workflows that set no `stepRetries`, unless a step sets its own `retries`.
   * `{ maxAttempts: 1 }` turns step retries off.
   * @default { maxAttempts: 3 } (exponential backoff: 1 s, then 2 s)
   */
  stepRetries?: StepRetryPolicy;
}

/** Options of `RedflowModule.forRoot` / `forRootAsync`. */
export interface RedflowModuleOptions {
  /** A stable id of this app: the owner of its workflows in the Redis registry. */
  app: string;
  /**
   * A redis:// URL, ioredis options, or an ioredis `Redis` / `Cluster` you own (it is not closed
   * on shutdown). @default process.env.REDIS_URL
   */
  connection?: string | RedisOptions | Redis | Cluster;
  /** @default process.env.REDFLOW_PREFIX ?? "redflow" */
  prefix?: string;
  /** `false` for a producer-only app that never claims runs. @default { enabled: true } */
  worker?: RedflowWorkerOptions | false;
  /** Defaults for workflows that do not set them. */
  defaults?: RedflowWorkflowDefaults;
  /** How long shutdown waits for running workflows to finish. @default '10s' */
  shutdownTimeout?: Duration;
  /** @deprecated Use `shutdownTimeout` (a duration such as `'10s'`, or ms); it goes in the next minor version. */
  shutdownTimeoutMs?: number;
  /** Largest input or step output in bytes. @default 1048576 */
  maxPayloadBytes?: number;
  /**
   * Serves the web dashboard as routes of this app (Express or Fastify): `{ path, authorize,
   * readOnly, redact }`. `authorize` is required: `basicAuth(...)`, `guard(MyGuard)`, a function,
   * or `() => true` for open access. With forRootAsync, give the path as `dashboardPath`.
   */
  dashboard?: DashboardOptions;
  /** Fail at startup, instead of warning, when Redis's maxmemory-policy is not noeviction. @default false */
  redis?: RedflowRedisOptions;
  /** How long a client call waits for Redis before rejecting with RedisUnavailableError. @default '10s' */
  commandTimeout?: Duration;
  /** @deprecated Use `commandTimeout` (a duration such as `'10s'`, or ms); it goes in the next minor version. */
  commandTimeoutMs?: number;
  /**
   * The source of workflow time for the client and worker (due times of waits, retries, `runAt`,
   * schedules); leases keep real time. `RedflowTestingModule` sets a `VirtualClock`. @default systemClock
   */
  clock?: Clock;
  /**
   * The event stream that `client.events()` reads: about the last `maxLen` run events of the prefix
   * are kept (`{ maxLen: 100_000 }` by default); `false` writes none. @default { maxLen: 100000 }
   */
  events?: EventStreamOptions | false;
  /**
   * Tracing of runs and steps: `redflowTracing()` from `nestjs-redflow/otel` for OpenTelemetry.
   * The trace context active where a run is started (the request's span, in a controller) is
   * stored with the run; the worker's spans of its attempts and steps are children of it. What
   * the tracer throws is logged and dropped. @default none
   */
  tracing?: RedflowTracing;
  /**
   * Encodes every payload stored in Redis (inputs, outputs, step records, signal and event
   * payloads, progress, `setEvent` values): `aesGcmCodec({ keys, current })` encrypts them with
   * AES-256-GCM. Ids, names, statuses, times and errors stay readable. Give every app of a prefix
   * the same codec and keys; see the security guide for key rotation. @default none: plain JSON
   */
  codec?: PayloadCodec;
  /** @internal Step mocks of `RedflowTestingModule`; not for production use. */
  stepMocks?: StepMocks;
}

/** Keys of `RedflowModuleOptions`. */
export const REDFLOW_MODULE_OPTION_KEYS = optionKeys<RedflowModuleOptions>()([
  'app',
  'connection',
  'prefix',
  'worker',
  'defaults',
  'shutdownTimeout',
  'shutdownTimeoutMs',
  'maxPayloadBytes',
  'dashboard',
  'redis',
  'commandTimeout',
  'commandTimeoutMs',
  'clock',
  'events',
  'codec',
  'tracing',
  'stepMocks',
]);

/** Keys of `RedflowWorkerOptions` (the `worker` option). */
export const REDFLOW_WORKER_OPTION_KEYS = optionKeys<RedflowWorkerOptions>()([
  'enabled',
  'queues',
  'concurrency',
  'runtime',
  'retention',
  'retentionDays',
  'logFailedRuns',
  'journalWarningBytes',
]);

/** Keys of `RedflowWorkflowDefaults` (the `defaults` option). */
export const REDFLOW_DEFAULTS_KEYS = optionKeys<RedflowWorkflowDefaults>()(['maxConcurrency', 'stepRetries']);

/** Keys of `RedflowRedisOptions` (the `redis` option). */
export const REDFLOW_REDIS_OPTION_KEYS = optionKeys<RedflowRedisOptions>()(['requireNoEviction', 'waitAtStartup']);

/** The options with every default applied. The only place defaults are merged. */
export interface ResolvedRedflowOptions extends RedflowModuleOptions {
  worker: Required<Pick<RedflowWorkerOptions, 'enabled' | 'concurrency'>> & RedflowWorkerOptions;
  /** `shutdownTimeout` (or its deprecated `shutdownTimeoutMs`) in ms. */
  shutdownMs: number;
}

const WHAT = 'RedflowModule options';

function checkBoolean(value: unknown, what: string): void {
  if (value !== undefined && typeof value !== 'boolean') throw new ConfigurationError(`${what} must be true or false, got ${describeValue(value)}.`);
}

/**
 * Validates the module options and applies every default. Throws `ConfigurationError` for an
 * unknown key (with the nearest known one) at any level, and for values Redis would choke on, so
 * the app fails at startup with a sentence naming the option instead of misbehaving later.
 */
export function resolveRedflowOptions(options: RedflowModuleOptions): ResolvedRedflowOptions {
  if (options === null || typeof options !== 'object') {
    throw new ConfigurationError(`${WHAT} must be an object such as { app: "billing", connection: "redis://..." }, got ${describeValue(options)}.`);
  }
  // `stepMocks` is internal (RedflowTestingModule): accepted, but never offered in messages.
  const { stepMocks: _internal, ...publicOptions } = options;
  assertKnownKeys(
    WHAT,
    publicOptions,
    REDFLOW_MODULE_OPTION_KEYS.filter((k) => k !== 'stepMocks'),
  );
  if (typeof options.app !== 'string' || !options.app) {
    throw new ConfigurationError(
      `RedflowModule option "app" must be a non-empty string, a stable id of this app (the owner of its workflows in Redis), got ${describeValue(options.app)}.`,
    );
  }
  checkUserName(options.app, 'RedflowModule option "app"');
  if (options.prefix !== undefined) checkResourceName(options.prefix, 'RedflowModule option "prefix"');
  const option = (key: string) => `RedflowModule option "${key}"`;
  const shutdownMs =
    renamedDuration(options, { name: 'shutdownTimeout', deprecated: 'shutdownTimeoutMs', label: option, allowZero: true, timer: true }) ?? 10_000;
  renamedDuration(options, { name: 'commandTimeout', deprecated: 'commandTimeoutMs', label: option, timer: true });

  if (options.worker !== undefined && options.worker !== false && (options.worker === null || typeof options.worker !== 'object')) {
    throw new ConfigurationError(`RedflowModule option "worker" must be false or an object such as { concurrency: 10 }, got ${describeValue(options.worker)}.`);
  }
  const worker: RedflowWorkerOptions = options.worker === false ? { enabled: false } : (options.worker ?? {});
  assertKnownKeys('RedflowModule option "worker"', worker, REDFLOW_WORKER_OPTION_KEYS);
  assertKnownKeys('RedflowModule option "worker.runtime"', worker.runtime, WORKER_RUNTIME_KEYS);
  checkBoolean(worker.enabled, 'RedflowModule option "worker.enabled"');
  checkBoolean(worker.logFailedRuns, 'RedflowModule option "worker.logFailedRuns"');
  renamedDuration(worker, { name: 'retention', deprecated: 'retentionDays', unitMs: 86_400_000, label: (key) => option(`worker.${key}`) });
  const concurrency = worker.concurrency === undefined ? 10 : checkPositiveCount(worker.concurrency, 'RedflowModule option "worker.concurrency"');
  if (worker.queues !== undefined) {
    if (!Array.isArray(worker.queues)) {
      throw new ConfigurationError(`RedflowModule option "worker.queues" must be an array of queue names, got ${describeValue(worker.queues)}.`);
    }
    worker.queues.forEach((queue, i) => checkResourceName(queue, `RedflowModule option "worker.queues[${i}]"`));
  }

  assertKnownKeys('RedflowModule option "defaults"', options.defaults, REDFLOW_DEFAULTS_KEYS);
  const maxConcurrency = options.defaults?.maxConcurrency;
  if (maxConcurrency !== undefined && maxConcurrency !== Infinity && !(Number.isInteger(maxConcurrency) && maxConcurrency >= 1)) {
    throw new ConfigurationError(
      `RedflowModule option "defaults.maxConcurrency" must be an integer >= 1, or Infinity for no limit, got ${describeValue(maxConcurrency)}.`,
    );
  }
  if (options.defaults?.stepRetries !== undefined) checkStepRetry(options.defaults.stepRetries, 'RedflowModule option "defaults.stepRetries"');
  assertKnownKeys('RedflowModule option "dashboard"', options.dashboard, DASHBOARD_OPTION_KEYS);
  assertKnownKeys('RedflowModule option "redis"', options.redis, REDFLOW_REDIS_OPTION_KEYS);
  checkBoolean(options.redis?.requireNoEviction, 'RedflowModule option "redis.requireNoEviction"');
  checkBoolean(options.redis?.waitAtStartup, 'RedflowModule option "redis.waitAtStartup"');
  checkEventStreamOption(options.events, 'RedflowModule option "events"');
  checkTracingOption(options.tracing, 'RedflowModule option');

  return {
    ...options,
    worker: { ...worker, enabled: worker.enabled ?? true, concurrency },
    shutdownMs,
  };
}
