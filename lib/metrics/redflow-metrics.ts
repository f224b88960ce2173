import { Counter, Gauge, Histogram, register, type Registry } from 'prom-client';

import { ConfigurationError, type QueueStats, type WorkerHooks, type WorkflowClient } from '../core';
import { assertKnownKeys, checkResourceName, optionKeys } from '../core/definition/option-checks';

/** Options of `redflowMetrics`. */
export interface RedflowMetricsOptions {
  /** The client whose Redis the queue gauges read at scrape time. */
  client: WorkflowClient;
  /** The registry the metrics are registered on. @default prom-client's default registry (`register`) */
  registry?: Registry;
  /** The start of every metric name. @default "redflow_" */
  prefix?: string;
  /** Buckets of the run duration histogram, in seconds. @default [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600] */
  runDurationBuckets?: number[];
  /** Buckets of the step duration histogram, in seconds. @default [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300] */
  stepDurationBuckets?: number[];
  /** The queues the depth gauges report. @default the queues of the workflows registered in Redis */
  queues?: string[];
}

const METRICS_OPTION_KEYS = optionKeys<RedflowMetricsOptions>()(['client', 'registry', 'prefix', 'runDurationBuckets', 'stepDurationBuckets', 'queues']);

/** What `redflowMetrics` returns. */
export interface RedflowMetrics {
  /** Worker hooks that record runs and steps: pass them to `startWorker({ hooks })`. */
  readonly hooks: Required<Pick<WorkerHooks, 'onRunComplete' | 'onRunFailed' | 'onRunCanceled' | 'onStepComplete' | 'onStepFailed'>>;
  /** The registry the metrics are on. */
  readonly registry: Registry;
  /** Removes the metrics from the registry (safe to call more than once). */
  remove(): void;
}

/** The outcome label of a run: `retried` is an attempt that failed with another one scheduled. */
export type RunOutcomeLabel = 'succeeded' | 'failed' | 'retried' | 'canceled';

const RUN_BUCKETS = [0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600];
const STEP_BUCKETS = [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300];
const QUEUE_STATUSES = ['queued', 'scheduled', 'running'] as const;

/** A repeated step's `#n` suffix is dropped, so that a step name stays one label value. */
export function stepLabel(step: string): string {
  return step.replace(/#\d+$/, '');
}

function checkOptions(options: RedflowMetricsOptions): void {
  if (typeof options !== 'object' || options === null) throw new ConfigurationError('redflowMetrics needs options, like redflowMetrics({ client }).');
  assertKnownKeys('redflowMetrics options', options, METRICS_OPTION_KEYS);
  if (!options.client || typeof options.client.getQueueStats !== 'function') {
    throw new ConfigurationError(
      'redflowMetrics needs a client: redflowMetrics({ client: createClient({ url }) }); the queue gauges read its Redis at scrape time.',
    );
  }
  if (options.prefix !== undefined && !/^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(options.prefix)) {
    throw new ConfigurationError(
      `redflowMetrics prefix ${JSON.stringify(options.prefix)} is not a valid start of a Prometheus metric name: use letters, digits, "_" and ":", like "redflow_".`,
    );
  }
  for (const name of ['runDurationBuckets', 'stepDurationBuckets'] as const) {
    const buckets = options[name];
    if (
      buckets !== undefined &&
      (!Array.isArray(buckets) ||
        !buckets.length ||
        buckets.some((b, i) => !(typeof b === 'number' && b > 0 && Number.isFinite(b)) || (i > 0 && b <= buckets[i - 1])))
    ) {
      throw new ConfigurationError(`redflowMetrics ${name} must be increasing positive numbers of seconds, like [0.1, 1, 10].`);
    }
  }
  if (options.queues !== undefined) {
    if (!Array.isArray(options.queues))
      throw new ConfigurationError(`redflowMetrics queues must be an array of queue names, like ['default'], got ${typeof options.queues}.`);
    options.queues.forEach((q, i) => checkResourceName(q, `redflowMetrics queues[${i}]`));
  }
}

/**
 * Prometheus metrics of Redflow on a prom-client registry:
 *
 * - `redflow_runs_total{workflow, status}`: attempts that ended here, `status` one of succeeded,
 *   failed, retried (failed with another attempt scheduled) and canceled;
 * - `redflow_run_duration_seconds{workflow, status}`: how long those attempts ran (not canceled ones);
 * - `redflow_step_duration_seconds{workflow, step, status}`: `step.run` functions, succeeded, failed
 *   or retried (by the step's own retry policy); a repeated step's `#n` suffix is dropped;
 * - `redflow_queue_runs{queue, status}`: queued, scheduled and running runs, read from Redis at
 *   scrape time (`client.getQueueStats()`: counting commands only);
 * - `redflow_queue_oldest_queued_age_seconds{queue}`: how long the oldest queued run has waited;
 * - `redflow_queue_paused{queue}`: 1 while the queue is paused, else 0.
 *
 * Counters and histograms come from the worker hooks, so each process reports the runs its own
 * worker executed (sum them in PromQL); the queue gauges report the whole prefix. Throws
 * `ConfigurationError` for bad options or when the metrics are already on the registry.
 */
export function redflowMetrics(options: RedflowMetricsOptions): RedflowMetrics {
  checkOptions(options);
  const { client } = options;
  const registry = options.registry ?? register;
  const prefix = options.prefix ?? 'redflow_';
  const names = {
    runs: `${prefix}runs_total`,
    runDuration: `${prefix}run_duration_seconds`,
    stepDuration: `${prefix}step_duration_seconds`,
    queueRuns: `${prefix}queue_runs`,
    oldest: `${prefix}queue_oldest_queued_age_seconds`,
    paused: `${prefix}queue_paused`,
  };
  for (const name of Object.values(names)) {
    if (registry.getSingleMetric(name)) {
      throw new ConfigurationError(
        `Metric "${name}" is already on this prom-client registry: call remove() on the earlier redflowMetrics() (RedflowMetricsModule removes its metrics when the app closes), or give another registry or prefix.`,
      );
    }
  }

  const runs = new Counter({
    name: names.runs,
    help: 'Run attempts that ended on this worker, by workflow and outcome (succeeded, failed, retried, canceled).',
    labelNames: ['workflow', 'status'],
    registers: [registry],
  });
  const runDuration = new Histogram({
    name: names.runDuration,
    help: 'How long run attempts ran on this worker, in seconds, by workflow and outcome.',
    labelNames: ['workflow', 'status'],
    buckets: options.runDurationBuckets ?? RUN_BUCKETS,
    registers: [registry],
  });
  const stepDuration = new Histogram({
    name: names.stepDuration,
    help: 'How long step functions ran on this worker, in seconds, by workflow, step and outcome.',
    labelNames: ['workflow', 'step', 'status'],
    buckets: options.stepDurationBuckets ?? STEP_BUCKETS,
    registers: [registry],
  });

  // One read of Redis per scrape, shared by both gauges: a registry starts their collect() in the
  // same tick, before the read settles; the next scrape reads again.
  let reading: Promise<QueueStats[] | undefined> | undefined;
  const read = () => {
    reading ??= client
      .getQueueStats(options.queues ? { queues: options.queues } : {})
      .catch(() => undefined)
      .finally(() => (reading = undefined));
    return reading;
  };
  const queueRuns = new Gauge({
    name: names.queueRuns,
    help: 'Runs of each queue by status (queued, scheduled, running), read from Redis at scrape time.',
    labelNames: ['queue', 'status'],
    registers: [registry],
    async collect() {
      const stats = await read();
      this.reset();
      for (const s of stats ?? []) for (const status of QUEUE_STATUSES) this.set({ queue: s.queue, status }, s[status]);
    },
  });
  const oldest = new Gauge({
    name: names.oldest,
    help: 'How long the oldest queued run of each queue has waited since it became claimable, in seconds (0 when none is queued).',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const stats = await read();
      this.reset();
      const now = client.clock.now();
      for (const s of stats ?? []) this.set({ queue: s.queue }, s.oldestQueuedAt === null ? 0 : Math.max(0, now - s.oldestQueuedAt) / 1000);
    },
  });

  const paused = new Gauge({
    name: names.paused,
    help: 'Whether each queue is paused (1) or not (0): a paused queue is claimed by no worker.',
    labelNames: ['queue'],
    registers: [registry],
    async collect() {
      const stats = await read();
      this.reset();
      for (const s of stats ?? []) this.set({ queue: s.queue }, s.paused ? 1 : 0);
    },
  });

  const ended = (workflow: string, status: RunOutcomeLabel, durationMs?: number) => {
    runs.inc({ workflow, status });
    if (durationMs !== undefined) runDuration.observe({ workflow, status }, durationMs / 1000);
  };
  let removed = false;
  return {
    registry,
    hooks: {
      onRunComplete: (e) => ended(e.workflow, 'succeeded', e.durationMs),
      onRunFailed: (e) => ended(e.workflow, e.willRetry ? 'retried' : 'failed', e.durationMs),
      onRunCanceled: (e) => ended(e.workflow, 'canceled'),
      onStepComplete: (e) => stepDuration.observe({ workflow: e.workflow, step: stepLabel(e.step), status: 'succeeded' }, e.durationMs / 1000),
      onStepFailed: (e) =>
        stepDuration.observe({ workflow: e.workflow, step: stepLabel(e.step), status: e.willRetry ? 'retried' : 'failed' }, e.durationMs / 1000),
    },
    remove() {
      if (removed) return;
      removed = true;
      const ours = new Map<string, unknown>([
        [names.runs, runs],
        [names.runDuration, runDuration],
        [names.stepDuration, stepDuration],
        [names.queueRuns, queueRuns],
        [names.oldest, oldest],
        [names.paused, paused],
      ]);
      for (const [name, metric] of ours) if (registry.getSingleMetric(name) === metric) registry.removeSingleMetric(name);
    },
  };
}
