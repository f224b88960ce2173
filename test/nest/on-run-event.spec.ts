import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { Injectable, Logger, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import {
  ConfigurationError,
  createAdmin,
  createClient,
  NonRetriableError,
  OnRunEvent,
  RedflowClient,
  RedflowModule,
  Step,
  Workflow,
  type RunCompleteEvent,
  type RunFailedEvent,
  type StepFailedEvent,
  type WorkflowContext,
} from '../../lib';
import { connect, eventually } from '../support/engine';

@Injectable()
class OrderWorkflows {
  @Workflow({ name: 'place-order', maxConcurrency: Infinity })
  async place({ input }: WorkflowContext<{ id: string; fail?: boolean }>) {
    const receipt = await this.charge(input.id, input.fail ?? false);
    return { receipt };
  }

  @Step('charge')
  async charge(id: string, fail: boolean) {
    if (fail) throw new NonRetriableError(`card of ${id} declined`);
    return `r-${id}`;
  }

  @Workflow({ name: 'other', maxConcurrency: Infinity })
  async other(_ctx: WorkflowContext) {
    return 'other';
  }
}

/** Any provider can listen: here, one that knows nothing of the workflows' classes. */
@Injectable()
class OrderAudit {
  readonly lines: string[] = [];

  @OnRunEvent('run.completed', { workflow: 'place-order' })
  completed(event: RunCompleteEvent) {
    this.lines.push(`completed ${event.workflow} ${JSON.stringify(event.output)}`);
  }

  @OnRunEvent('run.failed')
  @OnRunEvent('run.completed', { workflow: ['other'] })
  any(event: RunFailedEvent | RunCompleteEvent) {
    this.lines.push(`${'error' in event ? 'failed' : 'completed'} ${event.workflow} (any)`);
  }

  @OnRunEvent('step.failed')
  async stepFailed(event: StepFailedEvent) {
    this.lines.push(`step failed ${event.step}: ${(event.error as Error).message}`);
    throw new Error('audit store is down');
  }
}

describe('@OnRunEvent', () => {
  const redis = connect();
  let app: INestApplication | undefined;
  let prefix: string;
  const errors: string[] = [];

  beforeEach(() => {
    prefix = `test:nest:${randomBytes(4).toString('hex')}`;
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    errors.length = 0;
    await app?.close();
    app = undefined;
    await createAdmin(createClient({ redis, prefix })).resetState();
  });
  afterAll(() => redis.quit());

  async function start(providers: unknown[]): Promise<INestApplication> {
    const module = await Test.createTestingModule({
      imports: [
        RedflowModule.forRoot({
          app: 'orders',
          connection: redis,
          prefix,
          worker: { runtime: { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 } },
        }),
      ],
      providers: providers as never[],
    }).compile();
    app = module.createNestApplication({ logger: false });
    // Capture what the Redflow logger reports (the app's logger is off).
    jest.spyOn(Logger.prototype, 'error').mockImplementation((message: unknown) => void errors.push(String(message)));
    await app.init();
    return app;
  }

  it('calls provider methods for their events and workflows; one that throws is logged and harms nothing', async () => {
    const nest = await start([OrderWorkflows, OrderAudit]);
    const client = nest.get(RedflowClient);
    const audit = nest.get(OrderAudit);
    expect(await (await client.run(OrderWorkflows, 'place', { id: 'o-1' })).result({ timeoutMs: 5_000 })).toEqual({ receipt: 'r-o-1' });
    expect(await (await client.run(OrderWorkflows, 'other', {})).result({ timeoutMs: 5_000 })).toBe('other');
    const failed = await client.run(OrderWorkflows, 'place', { id: 'o-2', fail: true });
    await expect(failed.result({ timeoutMs: 5_000 })).rejects.toThrow('card of o-2 declined');
    await eventually(() => audit.lines.length === 4);
    expect(audit.lines).toEqual([
      'completed place-order {"receipt":"r-o-1"}',
      'completed other (any)',
      'step failed charge: card of o-2 declined',
      'failed place-order (any)',
    ]);
    await eventually(() => errors.some((e) => e.includes("@OnRunEvent('step.failed') OrderAudit.stepFailed threw: audit store is down")));
    expect((await client.getRun(failed.id))?.status).toBe('failed');
  });

  it('refuses unknown events and a workflow filter on worker.error when the class is decorated', () => {
    expect(() => OnRunEvent('run.finished' as never)).not.toThrow();
    const decorate = (event: string, options?: object) => () => {
      class Listener {
        handle() {}
      }
      const descriptor = Object.getOwnPropertyDescriptor(Listener.prototype, 'handle')!;
      OnRunEvent(event as never, options as never)(Listener.prototype, 'handle', descriptor);
    };
    expect(decorate('run.finished')).toThrow(ConfigurationError);
    expect(decorate('run.finished')).toThrow(/unknown event "run.finished"\. Use one of run\.started, run\.completed/);
    expect(decorate('worker.error', { workflow: 'x' })).toThrow(/'worker.error' belongs to no workflow/);
    expect(decorate('run.completed', { workflows: 'x' })).toThrow(/workflows/);
  });
});
