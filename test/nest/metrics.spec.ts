import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { Injectable, type INestApplication } from '@nestjs/common';
import { Registry } from 'prom-client';
import request from 'supertest';

import {
  ConfigurationError,
  createAdmin,
  createClient,
  NonRetriableError,
  RedflowClient,
  RedflowModule,
  startWorker,
  Step,
  Workflow,
  WorkflowRegistry,
  type WorkflowContext,
} from '../../lib';
import { redflowMetrics, RedflowMetricsModule } from '../../lib/metrics';
import { connect, eventually } from '../support/engine';
import { nestAppPerTest } from '../support/nest-app';
import { OwnRedis } from '../support/own-redis';

@Injectable()
class PaymentWorkflows {
  @Workflow({ name: 'charge-card', maxConcurrency: Infinity })
  async charge({ input }: WorkflowContext<{ fail?: boolean }>) {
    await this.authorize(input.fail ?? false);
    return this.capture();
  }

  @Step('authorize')
  async authorize(fail: boolean) {
    if (fail) throw new NonRetriableError('card declined');
    return 'auth';
  }

  @Step('capture')
  async capture() {
    return 'captured';
  }

  /** Fails its first attempt, succeeds on the second. */
  @Workflow({ name: 'flaky-refund', retries: { maxAttempts: 2, delay: 10 } })
  async refund({ run }: WorkflowContext) {
    if (run.attempt === 1) throw new Error('gateway timeout');
    return 'refunded';
  }

  /** Runs until canceled. */
  @Workflow({ name: 'hold-funds' })
  async hold({ signal }: WorkflowContext) {
    await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason as Error)));
  }

  /** Served by no worker of the app: its runs stay queued or scheduled. */
  @Workflow({ name: 'export-ledger', queue: 'exports' })
  async exportLedger(_ctx: WorkflowContext) {
    return 'exported';
  }
}

const runtime = { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 };

/** The value of one sample line of a Prometheus text exposition, or undefined when absent. */
function sample(text: string, line: string): number | undefined {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

describe('RedflowMetricsModule in a Nest app', () => {
  const nest = nestAppPerTest('metrics');
  const { redis } = nest;

  async function start(metrics: Parameters<typeof RedflowMetricsModule.forRoot>[0]): Promise<INestApplication> {
    return nest.start({
      imports: [
        RedflowModule.forRoot({ app: 'payments', connection: redis, prefix: nest.prefix, worker: { queues: ['default'], concurrency: 5, runtime } }),
        RedflowMetricsModule.forRoot(metrics),
      ],
      providers: [PaymentWorkflows],
    });
  }

  it('counts runs by workflow and outcome, times runs and steps, and reads queue depths at scrape time over /metrics', async () => {
    const registry = new Registry();
    await start({ registry, path: '/metrics' });
    const client = nest.app!.get(RedflowClient);

    const ok = await Promise.all([client.run(PaymentWorkflows, 'charge', {}), client.run(PaymentWorkflows, 'charge', {})]);
    expect(await Promise.all(ok.map((h) => h.result()))).toEqual(['captured', 'captured']);
    const declined = await client.run(PaymentWorkflows, 'charge', { fail: true });
    await expect(declined.result()).rejects.toThrow('card declined');
    const refund = await client.run(PaymentWorkflows, 'refund', undefined);
    expect(await refund.result()).toBe('refunded');
    const hold = await client.run(PaymentWorkflows, 'hold', undefined);
    await eventually(async () => (await client.getRun(hold.id))?.status === 'running');
    const whileHolding = (await request(nest.app!.getHttpServer()).get('/metrics').expect(200)).text;
    expect(sample(whileHolding, 'redflow_queue_runs{queue="default",status="running"}')).toBe(1);
    await client.cancelRun(hold.id, { reason: 'released' });
    for (let i = 0; i < 2; i++) await client.run(PaymentWorkflows, 'exportLedger', undefined);
    await client.run(PaymentWorkflows, 'exportLedger', undefined, { runAt: Date.now() + 60_000 });

    // Hooks are called after the run's end is stored: wait for the last one.
    const scrape = async () =>
      (
        await request(nest.app!.getHttpServer())
          .get('/metrics')
          .expect(200)
          .expect('content-type', /^text\/plain; version=0.0.4/)
      ).text;
    const text: string = await eventually(async () => {
      const body = await scrape();
      return sample(body, 'redflow_runs_total{workflow="hold-funds",status="canceled"}') === 1 &&
        sample(body, 'redflow_runs_total{workflow="flaky-refund",status="succeeded"}') === 1
        ? body
        : '';
    });

    expect(sample(text, 'redflow_runs_total{workflow="charge-card",status="succeeded"}')).toBe(2);
    expect(sample(text, 'redflow_runs_total{workflow="charge-card",status="failed"}')).toBe(1);
    expect(sample(text, 'redflow_runs_total{workflow="flaky-refund",status="retried"}')).toBe(1);
    expect(sample(text, 'redflow_runs_total{workflow="flaky-refund",status="succeeded"}')).toBe(1);
    expect(sample(text, 'redflow_runs_total{workflow="flaky-refund",status="failed"}')).toBeUndefined();
    expect(sample(text, 'redflow_runs_total{workflow="hold-funds",status="canceled"}')).toBe(1);

    expect(sample(text, 'redflow_run_duration_seconds_count{workflow="charge-card",status="succeeded"}')).toBe(2);
    expect(sample(text, 'redflow_run_duration_seconds_count{workflow="charge-card",status="failed"}')).toBe(1);
    expect(sample(text, 'redflow_run_duration_seconds_count{workflow="flaky-refund",status="retried"}')).toBe(1);
    expect(sample(text, 'redflow_run_duration_seconds_bucket{le="+Inf",workflow="charge-card",status="succeeded"}')).toBe(2);
    expect(sample(text, 'redflow_run_duration_seconds_sum{workflow="charge-card",status="succeeded"}')).toBeGreaterThanOrEqual(0);

    expect(sample(text, 'redflow_step_duration_seconds_count{workflow="charge-card",step="authorize",status="succeeded"}')).toBe(2);
    expect(sample(text, 'redflow_step_duration_seconds_count{workflow="charge-card",step="authorize",status="failed"}')).toBe(1);
    expect(sample(text, 'redflow_step_duration_seconds_count{workflow="charge-card",step="capture",status="succeeded"}')).toBe(2);

    expect(sample(text, 'redflow_queue_runs{queue="exports",status="queued"}')).toBe(2);
    expect(sample(text, 'redflow_queue_runs{queue="exports",status="scheduled"}')).toBe(1);
    expect(sample(text, 'redflow_queue_runs{queue="exports",status="running"}')).toBe(0);
    expect(sample(text, 'redflow_queue_runs{queue="default",status="queued"}')).toBe(0);
    expect(sample(text, 'redflow_queue_runs{queue="default",status="running"}')).toBe(0);
    expect(sample(text, 'redflow_queue_oldest_queued_age_seconds{queue="exports"}')).toBeGreaterThan(0);
    expect(sample(text, 'redflow_queue_oldest_queued_age_seconds{queue="default"}')).toBe(0);

    // The gauges are read again at each scrape.
    await client.run(PaymentWorkflows, 'exportLedger', undefined);
    expect(sample(await scrape(), 'redflow_queue_runs{queue="exports",status="queued"}')).toBe(3);
  });

  it('registers on the default registry without a route, and removes its metrics when the app closes', async () => {
    const { register } = await import('prom-client');
    await start(undefined);
    expect(register.getSingleMetric('redflow_runs_total')).toBeDefined();
    await request(nest.app!.getHttpServer()).get('/metrics').expect(404);
    const client = nest.app!.get(RedflowClient);
    expect(await (await client.run(PaymentWorkflows, 'charge', {})).result()).toBe('captured');
    await eventually(async () =>
      (await register.getSingleMetricAsString('redflow_runs_total')).includes('redflow_runs_total{workflow="charge-card",status="succeeded"} 1'),
    );
    await nest.app!.close();
    nest.app = undefined;
    expect(register.getSingleMetric('redflow_runs_total')).toBeUndefined();
    expect(register.getSingleMetric('redflow_queue_runs')).toBeUndefined();
  });

  it('forRootAsync builds the options from providers and serves the route given next to useFactory', async () => {
    const registry = new Registry();
    const app = await nest.start({
      imports: [
        RedflowModule.forRoot({ app: 'payments', connection: redis, prefix: nest.prefix, worker: false }),
        RedflowMetricsModule.forRootAsync({ path: '/internal/metrics', useFactory: () => ({ registry, prefix: 'shop_redflow_' }) }),
      ],
      providers: [PaymentWorkflows],
    });
    const text = (await request(app.getHttpServer()).get('/internal/metrics').expect(200)).text;
    expect(sample(text, 'shop_redflow_queue_runs{queue="exports",status="queued"}')).toBe(0);
    expect(registry.getSingleMetric('shop_redflow_runs_total')).toBeDefined();
  });

  it('refuses a bad path or option with ConfigurationError', async () => {
    expect(() => RedflowMetricsModule.forRoot({ path: 'metrics' })).toThrow(
      'RedflowMetricsModule path must be a route path starting with "/", like "/metrics", got "metrics".',
    );
    await expect(start({ prefix: 'redflow-' })).rejects.toThrow(ConfigurationError);
    await expect(start({ prefix: 'redflow-' })).rejects.toThrow('redflowMetrics prefix "redflow-" is not a valid start of a Prometheus metric name');
  });
});

describe('redflowMetrics without Nest', () => {
  it('records through worker hooks, reads gauges from Redis, refuses a second registration on one registry', async () => {
    const redis = connect();
    const prefix = `test:metrics:${randomBytes(4).toString('hex')}`;
    const registry = new WorkflowRegistry();
    // A repeated step name ("render", "render#2") is one series.
    const send = registry.define(
      'send-mail',
      { queue: 'mail' },
      async ({ step }) => (await step.run('render', () => 'ht')) + (await step.run('render', () => 'ml')),
    );
    const client = createClient({ redis, prefix, registry });
    const promRegistry = new Registry();
    const metrics = redflowMetrics({ client, registry: promRegistry });
    expect(() => redflowMetrics({ client, registry: promRegistry })).toThrow(
      'Metric "redflow_runs_total" is already on this prom-client registry: call remove() on the earlier redflowMetrics()',
    );
    const worker = await startWorker({ app: 'mailer', client, registry, hooks: metrics.hooks, runtime });
    try {
      expect(await (await client.start(send, undefined)).result()).toBe('html');
      await eventually(async () =>
        (await promRegistry.getSingleMetricAsString('redflow_runs_total')).includes('redflow_runs_total{workflow="send-mail",status="succeeded"} 1'),
      );
      const text = await promRegistry.metrics();
      expect(sample(text, 'redflow_step_duration_seconds_count{workflow="send-mail",step="render",status="succeeded"}')).toBe(2);
      expect(text).not.toContain('render#2');
      expect(sample(text, 'redflow_queue_runs{queue="mail",status="queued"}')).toBe(0);
      metrics.remove();
      expect(await promRegistry.metrics()).toBe('\n');
    } finally {
      await worker.stop();
      await createAdmin(client).resetState();
      await client.close();
      await redis.quit();
    }
  });
});

describe('redflowMetrics while Redis is down', () => {
  it('a scrape still answers, with the counters and without the queue gauges, within commandTimeoutMs', async () => {
    const own = await OwnRedis.start();
    const registry = new WorkflowRegistry();
    registry.define('send-mail', { queue: 'mail' }, async () => 'sent');
    const client = createClient({ url: own.url, prefix: 'down', registry, commandTimeoutMs: 300 });
    const promRegistry = new Registry();
    const metrics = redflowMetrics({ client, registry: promRegistry, queues: ['mail'] });
    try {
      metrics.hooks.onRunComplete({ runId: 'r1', workflow: 'send-mail', attempt: 1, output: 'sent', durationMs: 20 });
      expect(sample(await promRegistry.metrics(), 'redflow_queue_runs{queue="mail",status="queued"}')).toBe(0);

      own.pause();
      const started = Date.now();
      const text = await promRegistry.metrics();
      expect(Date.now() - started).toBeLessThan(300 + 1_000);
      expect(sample(text, 'redflow_runs_total{workflow="send-mail",status="succeeded"}')).toBe(1);
      expect(sample(text, 'redflow_run_duration_seconds_sum{workflow="send-mail",status="succeeded"}')).toBe(0.02);
      expect(text).not.toContain('redflow_queue_runs{');
      expect(text).not.toContain('redflow_queue_oldest_queued_age_seconds{');

      own.resume();
      expect(sample(await promRegistry.metrics(), 'redflow_queue_runs{queue="mail",status="scheduled"}')).toBe(0);
    } finally {
      own.resume();
      metrics.remove();
      await client.close();
      await own.stop();
    }
  });
});
