import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { Controller, Get, Injectable, Module, type INestApplication } from '@nestjs/common';
import { HealthCheck, HealthCheckService, TerminusModule } from '@nestjs/terminus';
import { Test } from '@nestjs/testing';
import { register } from 'prom-client';
import request from 'supertest';

import { createAdmin, createClient, RedflowClient, RedflowModule, Workflow, type WorkflowContext } from '../../lib';
import { RedflowHealthIndicator, RedflowHealthModule } from '../../lib/health';
import { RedflowMetricsModule } from '../../lib/metrics';
import { eventually } from '../support/engine';

/** The example of the "Health checks and metrics" section of docs/guide/observability.md, as written there. */
@Injectable()
class Greetings {
  @Workflow({ name: 'greet' })
  async greet({ input, step }: WorkflowContext<{ name: string }>) {
    return step.run('compose', () => `Hello ${input.name}`);
  }
}

@Controller('health')
class HealthController {
  constructor(
    private readonly health: HealthCheckService,
    private readonly redflow: RedflowHealthIndicator,
  ) {}

  @Get()
  @HealthCheck()
  check() {
    return this.health.check([() => this.redflow.isHealthy('redflow', { timeoutMs: 1_000, maxQueued: 1_000 })]);
  }
}

@Module({ imports: [TerminusModule, RedflowHealthModule], controllers: [HealthController] })
class HealthModule {}

describe('docs/guide/observability.md: health checks and metrics', () => {
  let app: INestApplication | undefined;
  const prefix = `test:readme-health:${randomBytes(4).toString('hex')}`;

  afterAll(async () => {
    await app?.close();
    const client = createClient({ url: process.env.REDFLOW_TEST_REDIS_URL, prefix });
    await createAdmin(client).resetState();
    await client.close();
  });

  it('serves /health and /metrics', async () => {
    @Module({
      imports: [
        RedflowModule.forRoot({ app: 'greeter', connection: process.env.REDFLOW_TEST_REDIS_URL, prefix }),
        RedflowMetricsModule.forRoot({ path: '/metrics' }),
        HealthModule,
      ],
      providers: [Greetings],
    })
    class AppModule {}

    const module = await Test.createTestingModule({ imports: [AppModule] }).compile();
    app = module.createNestApplication({ logger: false });
    await app.init();

    const handle = await app.get(RedflowClient).run(Greetings, 'greet', { name: 'Ada' });
    expect(await handle.result()).toBe('Hello Ada');

    const health = await request(app.getHttpServer()).get('/health').expect(200);
    expect(health.body.info.redflow).toMatchObject({ status: 'up', redis: { up: true }, queues: { default: { queued: 0, running: 0 } } });
    expect(health.body.info.redflow.workers[0]).toMatchObject({ alive: true, queues: ['default'] });

    const metrics = await eventually(async () => {
      const text = (await request(app!.getHttpServer()).get('/metrics').expect(200)).text;
      return text.includes('redflow_runs_total{workflow="greet",status="succeeded"} 1') ? text : '';
    });
    expect(metrics).toContain('redflow_step_duration_seconds_count{workflow="greet",step="compose",status="succeeded"} 1');
    expect(metrics).toContain('redflow_queue_runs{queue="default",status="queued"} 0');
    // The default registry: whatever else serves it sees the same metrics.
    expect(await register.getSingleMetricAsString('redflow_runs_total')).toContain('status="succeeded"} 1');
  });
});
