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

/** Listens by workflow class (and method), checked by the compiler and resolved to names at startup. */
@Injectable()
class TypedAudit {
  readonly lines: string[] = [];

  @OnRunEvent('run.completed', { workflow: OrderWorkflows, method: 'other' })
  otherDone(event: RunCompleteEvent) {
    this.lines.push(`one method: ${event.workflow}`);
  }

  @OnRunEvent('run.completed', { workflow: OrderWorkflows })
  anyDone(event: RunCompleteEvent) {
    this.lines.push(`whole class: ${event.workflow}`);
  }
}

/** Never provided: only the compiler's verdict on it counts. */
export class TypeCheckedAudit {
  // @ts-expect-error "charge" is a @Step, not a @Workflow method of OrderWorkflows
  @OnRunEvent('run.completed', { workflow: OrderWorkflows, method: 'charge' })
  never() {}
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

  it('listens by workflow class, or by class and method', async () => {
    const nest = await start([OrderWorkflows, TypedAudit]);
    const client = nest.get(RedflowClient);
    const audit = nest.get(TypedAudit);
    await (await client.run(OrderWorkflows, 'place', { id: 'o-3' })).result({ timeout: '5s' });
    await (await client.run(OrderWorkflows, 'other', {})).result({ timeout: '5s' });
    await eventually(() => audit.lines.length === 3);
    expect(audit.lines.sort()).toEqual(['one method: other', 'whole class: other', 'whole class: place-order']);
  });

  it('fails at startup when the class or method it names is not a workflow', async () => {
    @Injectable()
    class WrongMethod {
      @OnRunEvent('run.failed', { workflow: OrderWorkflows, method: 'charge' as never })
      handle() {}
    }
    await expect(start([OrderWorkflows, WrongMethod])).rejects.toThrow(
      '@OnRunEvent of WrongMethod.handle listens to OrderWorkflows.charge, which is not a @Workflow method. Decorate it with @Workflow(), or fix the name.',
    );
    await app?.close();
    app = undefined;
    @Injectable()
    class NotWorkflows {
      ping() {}
    }
    @Injectable()
    class WrongClass {
      @OnRunEvent('run.failed', { workflow: NotWorkflows })
      handle() {}
    }
    await expect(start([OrderWorkflows, WrongClass])).rejects.toThrow(
      '@OnRunEvent of WrongClass.handle listens to the workflows of NotWorkflows, which has no @Workflow method.',
    );
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
    expect(decorate('run.completed', { workflow: 'x', method: 'y' })).toThrow(/has a method but no workflow class/);
  });
});
