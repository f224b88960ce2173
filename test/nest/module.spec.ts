import { RedflowOrchestrator } from '../../lib/nest/redflow.orchestrator';

import 'reflect-metadata';

import { Injectable, Module, type INestApplication } from '@nestjs/common';
import { IsInt, Min } from 'class-validator';

import {
  createAdmin,
  createClient,
  InputValidationError,
  OnEvent,
  RedflowAdmin,
  RedflowClient,
  RedflowModule,
  Step,
  Workflow,
  type RedflowModuleOptions,
  type WorkflowContext,
} from '../../lib';
import { eventually } from '../support/engine';
import { nestAppPerTest } from '../support/nest-app';

class ChargeDto {
  @IsInt() @Min(1) cents!: number;
}

@Injectable()
class Ledger {
  readonly entries: string[] = [];
}

@Injectable()
class BillingWorkflows {
  calls = 0;
  constructor(private readonly ledger: Ledger) {}

  @Workflow({ name: 'bill', input: ChargeDto, retries: { maxAttempts: 2, delay: 10 } })
  async bill({ input, run }: WorkflowContext<ChargeDto>): Promise<{ entry: string; attempt: number }> {
    const entry = await this.record(input.cents);
    await this.record(input.cents); // a second call is a second step: "record#2"
    if (run.attempt === 1) throw new Error('flaky downstream');
    return { entry, attempt: run.attempt };
  }

  @Step('record')
  async record(cents: number): Promise<string> {
    this.calls++;
    const entry = `charged ${cents}`;
    this.ledger.entries.push(entry);
    return entry;
  }

  @OnEvent('invoice.paid')
  @Workflow({ name: 'on-paid', maxConcurrency: Infinity })
  async onPaid({ input }: WorkflowContext<{ invoice: string }>) {
    this.ledger.entries.push(`paid ${input.invoice}`);
    return input.invoice;
  }
}

@Injectable()
class ReceiptWorkflows {
  deliveries = 0;

  @Workflow({ name: 'send-receipt' })
  async send({ input }: WorkflowContext<{ to: string }>) {
    return this.deliver(input.to);
  }

  @Step({ name: 'deliver', retries: { maxAttempts: 3, backoff: 'fixed', delay: 10 } })
  async deliver(to: string): Promise<string> {
    if (++this.deliveries < 3) throw new Error(`mail server busy (${this.deliveries})`);
    return `sent to ${to}`;
  }
}

class ApproveDto {
  @IsInt() @Min(1) level!: number;
}

@Injectable()
class ApprovalWorkflows {
  static readonly signals = { approve: ApproveDto };

  @Workflow({ name: 'approval' })
  async approval({ step }: WorkflowContext<{ order: string }>) {
    const decision = await step.waitForSignal<ApproveDto>('await-approval', 'approve', { timeout: '1m' });
    return decision?.level ?? 0;
  }
}

const runtime = { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 };

describe('RedflowModule', () => {
  const nest = nestAppPerTest('nest');
  const { redis } = nest;

  async function start(imports: unknown[], providers: unknown[] = [Ledger, BillingWorkflows]): Promise<INestApplication> {
    return nest.start({ imports: imports as never[], providers: providers as never[] });
  }

  const options = (): RedflowModuleOptions => ({ app: 'billing', connection: redis, prefix: nest.prefix, worker: { runtime } });

  it('forRoot: runs @Workflow methods with their injected dependencies, and @Step calls are durable steps', async () => {
    await start([RedflowModule.forRoot(options())]);
    const client = nest.app!.get(RedflowClient);
    const handle = await client.run(BillingWorkflows, 'bill', { cents: 250 });
    await expect(handle.result({ timeoutMs: 5000 })).resolves.toEqual({ entry: 'charged 250', attempt: 2 });
    // Two @Step calls on attempt 1; attempt 2 replays them from Redis.
    expect(nest.app!.get(BillingWorkflows).calls).toBe(2);
    expect(nest.app!.get(Ledger).entries).toEqual(['charged 250', 'charged 250']);
    expect((await client.getRunSteps(handle.id)).map((s) => [s.name, s.output])).toEqual([
      ['record', 'charged 250'],
      ['record#2', 'charged 250'],
    ]);
    expect((await client.listWorkflows()).map((w) => [w.name, w.owner])).toEqual([
      ['bill', 'billing'],
      ['on-paid', 'billing'],
    ]);
  });

  it('@Step({ retries }) retries the method by its own policy within one run attempt', async () => {
    const client = (await start([RedflowModule.forRoot(options())], [ReceiptWorkflows])).get(RedflowClient);
    const handle = await client.run(ReceiptWorkflows, 'send', { to: 'ada@example.com' });
    await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe('sent to ada@example.com');
    expect(nest.app!.get(ReceiptWorkflows).deliveries).toBe(3);
    expect((await client.getRun(handle.id))!.attempt).toBe(1);
    expect(await client.getRunSteps(handle.id)).toEqual([
      expect.objectContaining({ name: 'deliver', status: 'succeeded', attempts: 3, lastError: expect.objectContaining({ message: 'mail server busy (2)' }) }),
    ]);
  });

  it('RedflowClient has no destructive operations; RedflowAdmin, injected by name, deletes the prefix and nothing else', async () => {
    await start([RedflowModule.forRoot({ ...options(), worker: false })]);
    const client = nest.app!.get(RedflowClient);
    expect('resetState' in client).toBe(false);
    const { id } = await client.runByName('bill', { cents: 3 }, { runAt: Date.now() + 60_000 });
    const other = createClient({ redis, prefix: `${nest.prefix}-other` });
    const kept = `${other.keys.base}keep`;
    await redis.set(kept, '1');
    const ours = `${client.keys.base.replace(/[{}]/g, '\\$&')}*`;
    expect((await redis.keys(ours)).length).toBeGreaterThan(3);
    await nest.app!.get(RedflowAdmin).resetState();
    expect(await client.getRun(id)).toBeNull();
    expect(await redis.keys(ours)).toEqual([]);
    expect(await redis.get(kept)).toBe('1');
    await createAdmin(other).resetState();
    expect(await redis.get(kept)).toBeNull();
  });

  it('validates the DTO input when a run is started, storing nothing when it fails', async () => {
    await start([RedflowModule.forRoot(options())]);
    const client = nest.app!.get(RedflowClient);
    await expect(client.run(BillingWorkflows, 'bill', { cents: 0 })).rejects.toThrow(InputValidationError);
    await expect(client.run(BillingWorkflows, 'bill', { cents: 0 })).rejects.toThrow(
      'Input for workflow "bill" is invalid: cents: cents must not be less than 1.',
    );
    expect(await client.listRuns()).toEqual([]);
  });

  it('starts @OnEvent workflows for each emitted event', async () => {
    await start([RedflowModule.forRoot(options())]);
    const client = nest.app!.get(RedflowClient);
    const [runId] = await client.emitEvent('invoice.paid', { invoice: 'inv_1' });
    await expect(client.handle(runId).result({ timeoutMs: 5000 })).resolves.toBe('inv_1');
    expect(nest.app!.get(Ledger).entries).toEqual(['paid inv_1']);
  });

  it('forRootAsync with useFactory and inject', async () => {
    @Injectable()
    class Config {
      get = () => options();
    }
    @Module({ providers: [Config], exports: [Config] })
    class ConfigModule {}
    await start([RedflowModule.forRootAsync({ imports: [ConfigModule], inject: [Config], useFactory: (config: Config) => config.get() })]);
    const handle = await nest.app!.get(RedflowClient).run(BillingWorkflows, 'bill', { cents: 5 });
    await expect(handle.result({ timeoutMs: 5000 })).resolves.toMatchObject({ entry: 'charged 5' });
  });

  it('forRootAsync with useClass, applying defaults.maxConcurrency and defaults.stepRetries to workflows that set none', async () => {
    @Injectable()
    class OptionsFactory {
      create(): RedflowModuleOptions {
        return { ...options(), defaults: { maxConcurrency: 4, stepRetries: { maxAttempts: 5, delay: '2s' } } };
      }
    }
    await start([RedflowModule.forRootAsync({ useClass: OptionsFactory })]);
    const meta = await nest.app!.get(RedflowClient).getWorkflowMeta('bill');
    expect(meta).toMatchObject({ name: 'bill', owner: 'billing' });
    expect(await redis.hget(nest.app!.get(RedflowClient).keys.workflow('bill'), 'maxConcurrency')).toBe('4');
    expect(await redis.hget(nest.app!.get(RedflowClient).keys.workflow('on-paid'), 'maxConcurrency')).toBe('0');
    expect(nest.app!.get(RedflowOrchestrator).runningWorker?.defaultStepRetries).toMatchObject({ maxAttempts: 5, delayMs: 2_000 });
  });

  it('forRootAsync with useExisting, and a connection given as ioredis options (owned and closed on shutdown)', async () => {
    const url = new URL(process.env.REDFLOW_TEST_REDIS_URL!);
    @Injectable()
    class SharedOptions {
      create(): RedflowModuleOptions {
        return { ...options(), connection: { host: url.hostname, port: Number(url.port) } };
      }
    }
    @Module({ providers: [SharedOptions], exports: [SharedOptions] })
    class SharedModule {}
    await start([RedflowModule.forRootAsync({ imports: [SharedModule], useExisting: SharedOptions })]);
    const client = nest.app!.get(RedflowClient);
    expect(client.redis).not.toBe(redis);
    const handle = await client.run(BillingWorkflows, 'bill', { cents: 7 });
    await expect(handle.result({ timeoutMs: 5000 })).resolves.toMatchObject({ entry: 'charged 7' });
    await nest.app!.close();
    nest.app = undefined;
    await eventually(() => (client.redis as { status: string }).status === 'end');
  });

  it('isGlobal makes RedflowClient injectable in modules that do not import RedflowModule', async () => {
    @Injectable()
    class Checkout {
      constructor(readonly client: RedflowClient) {}
    }
    @Module({ providers: [Checkout] })
    class FeatureModule {}
    await start([RedflowModule.forRoot({ ...options(), isGlobal: true }), FeatureModule]);
    expect(nest.app!.get(Checkout).client).toBe(nest.app!.get(RedflowClient));
  });

  it("client.signal(WorkflowClass, runId, name, payload) validates the payload by the class's declared signal DTO", async () => {
    const client = (await start([RedflowModule.forRoot(options())], [ApprovalWorkflows])).get(RedflowClient);
    const handle = await client.run(ApprovalWorkflows, 'approval', { order: 'o-1' });
    await expect(client.signal(ApprovalWorkflows, handle.id, 'approve', { level: 0 })).rejects.toThrow(
      'The payload of signal "approve" of ApprovalWorkflows is invalid: level: level must not be less than 1. Fix it to match its schema.',
    );
    await expect(client.signal(ApprovalWorkflows, handle.id, 'reject' as 'approve', { level: 1 })).rejects.toThrow(
      /ApprovalWorkflows declares no signal "reject" \(declared: approve\)/,
    );
    expect(await client.redis.llen(client.keys.signals(handle.id))).toBe(0);
    expect(await client.signal(ApprovalWorkflows, handle.id, 'approve', { level: 2 })).toBe(true);
    await expect(handle.result({ timeoutMs: 5000 })).resolves.toBe(2);
    // The untyped form still works, and says false for an ended run.
    expect(await client.signal(handle.id, 'approve', { level: 3 })).toBe(false);
  });

  it('client.run rejects a method that is not a @Workflow', async () => {
    await start([RedflowModule.forRoot({ ...options(), worker: false })]);
    const client = nest.app!.get(RedflowClient);
    // `record` takes a number, not a context: it is not a workflow method, so it does not type-check either.
    // @ts-expect-error not a workflow method
    expect(() => client.run(BillingWorkflows, 'record', 1)).toThrow(
      'BillingWorkflows.record is not a @Workflow method. Decorate it with @Workflow() or start a workflow by name with runByName().',
    );
  });
});

/** Compile-time checks of `client.signal` with a workflow class: `npm run typecheck` fails if a wrong call compiles. */
export function typedSignalChecks(client: RedflowClient): void {
  void client.signal(ApprovalWorkflows, 'run-id', 'approve', { level: 1 });
  // @ts-expect-error wrong payload type
  void client.signal(ApprovalWorkflows, 'run-id', 'approve', { level: 'high' });
  // @ts-expect-error no such signal
  void client.signal(ApprovalWorkflows, 'run-id', 'reject', { level: 1 });
  // @ts-expect-error the class declares no signals
  void client.signal(BillingWorkflows, 'run-id', 'approve', { level: 1 });
}

/** Compile-time checks of `client.run`: `npm run typecheck` fails if a wrong call compiles. */
export function typedRunChecks(client: RedflowClient): void {
  void client.run(BillingWorkflows, 'bill', { cents: 1 });
  // @ts-expect-error wrong input type
  void client.run(BillingWorkflows, 'bill', { cents: 'one' });
  // @ts-expect-error missing input field
  void client.run(BillingWorkflows, 'bill', {});
  // @ts-expect-error no such method
  void client.run(BillingWorkflows, 'nope', { cents: 1 });
  void client.run(BillingWorkflows, 'bill', { cents: 1 }).then(async (h) => {
    const out = await h.result();
    const attempt: number = out.attempt;
    // @ts-expect-error the output is typed
    const wrong: string = out.attempt;
    return [attempt, wrong];
  });
}
