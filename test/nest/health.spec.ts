import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { Controller, Get, Inject, Injectable, Module, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import request from 'supertest';

import {
  ConfigurationError,
  createAdmin,
  createClient,
  RedflowClient,
  RedflowModule,
  RedflowQueues,
  startWorker,
  Workflow,
  WorkflowRegistry,
  type RedflowModuleOptions,
  type WorkflowContext,
} from '../../lib';
import { checkRedflowHealth, RedflowHealthIndicator, RedflowHealthModule, type RedflowHealthOptions } from '../../lib/health';
import { connect } from '../support/engine';
import { OwnRedis } from '../support/own-redis';

@Injectable()
class ReportWorkflows {
  @Workflow({ name: 'build-report', maxConcurrency: Infinity })
  async build({ input }: WorkflowContext<{ id: string }>) {
    return `report ${input.id}`;
  }

  /** Served by no worker of the app: its runs stay queued. */
  @Workflow({ name: 'export-archive', queue: 'exports' })
  async exportArchive(_ctx: WorkflowContext) {
    return 'archived';
  }
}

const HEALTH_OPTIONS = Symbol('health options');

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redflow: RedflowHealthIndicator,
    @Inject(HEALTH_OPTIONS) private readonly options: RedflowHealthOptions,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.redflow.isHealthy('redflow', this.options)]);
  }
}

const runtime = { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 };

describe('RedflowHealthIndicator in a Nest app with Terminus', () => {
  const redis = connect();
  let app: INestApplication | undefined;
  let own: OwnRedis | undefined;
  let prefix: string;

  beforeEach(() => {
    prefix = `test:health:${randomBytes(4).toString('hex')}`;
  });
  afterEach(async () => {
    if (own) {
      try {
        own.resume();
      } catch {
        // Killed: started again below.
      }
      if (own.cli('ping') !== 'PONG') await own.restart();
    }
    await app?.close();
    app = undefined;
    await own?.stop();
    own = undefined;
    await createAdmin(createClient({ redis, prefix })).resetState();
  });
  afterAll(() => redis.quit());

  async function start(health: RedflowHealthOptions, connection: RedflowModuleOptions['connection'] = redis): Promise<INestApplication> {
    @Module({
      imports: [TerminusModule.forRoot({ logger: false }), RedflowHealthModule],
      controllers: [HealthController],
      providers: [{ provide: HEALTH_OPTIONS, useValue: health }],
    })
    class HealthModule {}
    const module = await Test.createTestingModule({
      imports: [
        RedflowModule.forRoot({ app: 'reports', connection, prefix, worker: { queues: ['default'], runtime }, shutdownTimeoutMs: 1_000 }),
        HealthModule,
      ],
      providers: [ReportWorkflows],
    }).compile();
    app = module.createNestApplication({ logger: false });
    await app.listen(0, '127.0.0.1');
    return app;
  }

  it('is up (200) with Redis latency, the worker and each queue', async () => {
    await start({ maxQueued: 10, maxOldestQueuedAgeMs: 60_000 });
    const client = app!.get(RedflowClient);
    const handle = await client.run(ReportWorkflows, 'build', { id: 'r1' });
    expect(await handle.result()).toBe('report r1');

    const res = await request(app!.getHttpServer()).get('/health').expect(200);
    expect(res.body.status).toBe('ok');
    const details = res.body.details.redflow;
    expect(details.status).toBe('up');
    expect(details.redis.up).toBe(true);
    expect(typeof details.redis.latencyMs).toBe('number');
    expect(details.redis.latencyMs).toBeGreaterThanOrEqual(0);
    expect(details.workers).toHaveLength(1);
    expect(details.workers[0]).toMatchObject({ queues: ['default'], alive: true, activeRuns: 0, concurrency: expect.any(Number) });
    expect(details.workers[0].lastClaimAgeMs).toBeGreaterThanOrEqual(0);
    expect(details.workers[0].heartbeatAgeMs).toBeLessThanOrEqual(runtime.leaseMs);
    expect(details.queues).toEqual({
      default: { queued: 0, scheduled: 0, running: 0, oldestQueuedAgeMs: null },
      exports: { queued: 0, scheduled: 0, running: 0, oldestQueuedAgeMs: null },
    });
    expect(details.problems).toEqual([]);
  });

  it('is down (503) naming the queue and the threshold when a backlog exceeds maxQueued or maxOldestQueuedAgeMs', async () => {
    await start({ maxQueued: 2, maxOldestQueuedAgeMs: 5 });
    const client = app!.get(RedflowClient);
    for (let i = 0; i < 3; i++) await client.run(ReportWorkflows, 'exportArchive', undefined);
    // The oldest run must have waited longer than 5 ms.
    await new Promise((r) => setTimeout(r, 20));

    const res = await request(app!.getHttpServer()).get('/health').expect(503);
    expect(res.body.status).toBe('error');
    const details = res.body.error.redflow;
    expect(details.status).toBe('down');
    expect(details.redis.up).toBe(true);
    expect(details.queues.exports).toMatchObject({ queued: 3, scheduled: 0, running: 0 });
    expect(details.queues.exports.oldestQueuedAgeMs).toBeGreaterThan(5);
    expect(details.queues.default.queued).toBe(0);
    expect(details.problems).toEqual([
      'Queue "exports" has 3 queued runs, more than maxQueued (2).',
      expect.stringMatching(/^The oldest queued run of queue "exports" has waited \d+ ms, more than maxOldestQueuedAgeMs \(5 ms\)\.$/),
    ]);
  });

  it('reports a paused queue as paused, and holds neither its backlog nor its age against the health (injected RedflowQueues)', async () => {
    await start({ maxQueued: 2, maxOldestQueuedAgeMs: 5 });
    const client = app!.get(RedflowClient);
    const queues = app!.get(RedflowQueues);
    expect(await queues.pause('exports', { note: 'archive store migration' })).toBe(true);
    for (let i = 0; i < 3; i++) await client.run(ReportWorkflows, 'exportArchive', undefined);
    await new Promise((r) => setTimeout(r, 20));
    const res = await request(app!.getHttpServer()).get('/health').expect(200);
    expect(res.body.details.redflow.queues.exports).toMatchObject({ queued: 3, paused: true });
    expect(res.body.details.redflow.problems).toEqual([]);
    await queues.resume('exports');
    expect((await request(app!.getHttpServer()).get('/health').expect(503)).body.error.redflow.problems[0]).toBe(
      'Queue "exports" has 3 queued runs, more than maxQueued (2).',
    );
  });

  it('counts scheduled runs and stays up below the thresholds', async () => {
    await start({ maxQueued: 3 });
    const client = app!.get(RedflowClient);
    for (let i = 0; i < 3; i++) await client.run(ReportWorkflows, 'exportArchive', undefined);
    await client.run(ReportWorkflows, 'exportArchive', undefined, { runAt: Date.now() + 60_000 });
    const res = await request(app!.getHttpServer()).get('/health').expect(200);
    expect(res.body.details.redflow.queues.exports).toMatchObject({ queued: 3, scheduled: 1, running: 0 });
  });

  it.each([
    ['stopped (killed)', (server: OwnRedis) => server.kill()],
    ['hung (SIGSTOP)', async (server: OwnRedis) => server.pause()],
  ])('is down (503) within timeoutMs when Redis is %s', async (_what, fault) => {
    own = await OwnRedis.start();
    await start({ timeoutMs: 300 }, own.url);
    await request(app!.getHttpServer()).get('/health').expect(200);

    await fault(own);
    const started = Date.now();
    const res = await request(app!.getHttpServer()).get('/health').expect(503);
    const elapsed = Date.now() - started;
    // Bounded by the timeout (plus HTTP), never waiting for the reconnection.
    expect(elapsed).toBeLessThan(300 + 1_000);
    const details = res.body.error.redflow;
    expect(details.redis).toMatchObject({ up: false, address: `127.0.0.1:${own.port}` });
    expect(details.problems[0]).toMatch(new RegExp(`^Redis at 127\\.0\\.0\\.1:${own.port} (did not answer within 300 ms|is unreachable: .+)`));
    expect(details.queues).toEqual({});
  });

  it('rejects bad options with ConfigurationError naming the option', async () => {
    await start({});
    const indicator = app!.get(RedflowHealthIndicator);
    await expect(indicator.isHealthy('redflow', { maxQueued: -1 })).rejects.toThrow(ConfigurationError);
    await expect(indicator.isHealthy('redflow', { maxQueued: -1 })).rejects.toThrow(/Redflow health option "maxQueued"/);
    await expect(indicator.isHealthy('redflow', { timout: 5 } as never)).rejects.toThrow(
      'Unknown option "timout" in Redflow health options. Did you mean "timeout"?',
    );
    // The deprecated name is still read, and both at once is an error naming the one to keep.
    await expect(indicator.isHealthy('redflow', { timeout: '1s', timeoutMs: 1_000 })).rejects.toThrow(
      'Redflow health option "timeout" and Redflow health option "timeoutMs" are the same option: keep Redflow health option "timeout"',
    );
    await expect(indicator.isHealthy('redflow', { queues: 'exports' } as never)).rejects.toThrow(
      'Redflow health option "queues" must be an array of queue names',
    );
  });
});

describe('checkRedflowHealth without Nest', () => {
  it('reports a stopped or stalled worker as down, and only the queues asked for', async () => {
    const prefix = `test:health:${randomBytes(4).toString('hex')}`;
    const registry = new WorkflowRegistry();
    const redis = connect();
    const client = createClient({ redis, prefix, registry });
    const worker = await startWorker({ app: 'plain', client, registry, queues: ['mail'], runtime });
    try {
      const up = await checkRedflowHealth(client, [worker.liveness], { queues: ['mail'] });
      expect(up.healthy).toBe(true);
      expect(up.details.workers[0]).toMatchObject({ alive: true, lastClaimAgeMs: null, queues: ['mail'] });
      expect(up.details.queues).toEqual({ mail: { queued: 0, scheduled: 0, running: 0, oldestQueuedAgeMs: null } });

      // A snapshot whose heartbeat is older than the lease: its timers stalled.
      const stale = { ...worker.liveness, lastHeartbeatAt: Date.now() - 5_000 };
      const stalled = await checkRedflowHealth(client, [stale], { queues: ['mail'] });
      expect(stalled.healthy).toBe(false);
      expect(stalled.details.problems).toEqual([
        expect.stringMatching(
          new RegExp(`^Worker "${worker.workerId}" has not run its heartbeat for \\d+ ms, more than its lease \\(1000 ms\\): its timers are not running`),
        ),
      ]);

      await worker.stop();
      const down = await checkRedflowHealth(client, [worker.liveness], { queues: ['mail'] });
      expect(down.healthy).toBe(false);
      expect(down.details.workers[0].alive).toBe(false);
      expect(down.details.problems).toEqual([`Worker "${worker.workerId}" is stopped and claims no runs.`]);
    } finally {
      await worker.stop();
      await createAdmin(client).resetState();
      await client.close();
      await redis.quit();
    }
  });
});
