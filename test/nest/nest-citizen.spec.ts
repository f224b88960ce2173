import 'reflect-metadata';

import { Body, Controller, Get, Injectable, Module, Param, Post, type INestApplication, type OnModuleInit } from '@nestjs/common';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { IsInt, Min } from 'class-validator';
import request from 'supertest';

import {
  createClient,
  Cron,
  InjectWorkflow,
  RedflowClient,
  RedflowModule,
  RedflowSchedules,
  UnknownWorkflowError,
  Workflow,
  type RedflowModuleOptions,
  type RunInfo,
  type WorkflowContext,
  type WorkflowRefOf,
} from '../../lib';
import { fastifyReady, nestAppPerTest } from '../support/nest-app';

class OrderDto {
  @IsInt() @Min(1) qty!: number;
}

@Injectable()
class OrderWorkflows implements OnModuleInit {
  @Workflow({ name: 'place-order', input: OrderDto, onFailure: 'orderFailed' })
  async place({ input }: WorkflowContext<OrderDto>): Promise<{ placed: number }> {
    return { placed: input.qty };
  }

  @Workflow({ name: 'limited', rateLimit: { limit: 1, period: '1m' }, maxConcurrency: Infinity })
  async limited(_ctx: WorkflowContext) {
    return 'ran';
  }

  @Workflow({ name: 'other-order' })
  async other(_ctx: WorkflowContext) {
    return 'other';
  }

  orderFailed(_failure: { error: unknown; run: RunInfo; input: unknown }): void {}
  format(qty: number): string {
    return `${qty} items`;
  }
  now(): number {
    return Date.now();
  }
  onModuleInit(): void {}
}

@Injectable()
class Orders {
  constructor(@InjectWorkflow(OrderWorkflows, 'place') readonly place: WorkflowRefOf<OrderWorkflows, 'place'>) {}
}

// The array form, as TypeOrmModule.forFeature([User]) (forFeature(OrderWorkflows) is the same).
@Module({ imports: [RedflowModule.forFeature([OrderWorkflows])], providers: [Orders] })
class OrdersModule {}

/** A feature module that imports nothing of this library. */
@Injectable()
class Reports {
  constructor(readonly client: RedflowClient) {}
}
@Module({ providers: [Reports] })
class ReportsModule {}

@Controller('orders')
class OrdersController {
  constructor(private readonly client: RedflowClient) {}

  @Post()
  async create(@Body() body: { qty: unknown; key?: string }) {
    const handle = await this.client.runByName('place-order', { qty: body.qty }, body.key ? { idempotencyKey: body.key } : undefined);
    return { id: handle.id };
  }

  @Get('runs/:id')
  async run(@Param('id') id: string) {
    return this.client.handle(id).result({ timeoutMs: 5_000 });
  }

  @Post('by-name/:name')
  async byName(@Param('name') name: string, @Body() body: unknown) {
    return { id: (await this.client.runByName(name, body)).id };
  }

  @Post('limited')
  async limited() {
    const first = await this.client.runByName('limited', {});
    await first.result({ timeoutMs: 5_000 });
    const second = await this.client.runByName('limited', {});
    return second.result({ timeoutMs: 5_000 });
  }

  @Get('down')
  async down() {
    const unreachable = createClient({ url: 'redis://127.0.0.1:1', commandTimeoutMs: 300, prefix: 'nowhere' });
    try {
      return await unreachable.getRun('r1');
    } finally {
      await unreachable.close();
    }
  }

  @Get('plain-error')
  plain() {
    throw new Error('not ours');
  }
}

const runtime = { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 };

/**
 * The package as a Nest team meets it: global by default, typed workflow handles per feature
 * module, this library's errors as HTTP statuses (Express and Fastify), and messages in Nest terms.
 */
describe('a first-class Nest citizen', () => {
  const nest = nestAppPerTest('nest-citizen');
  const { redis } = nest;

  const options = (extra: Partial<RedflowModuleOptions> = {}): RedflowModuleOptions => ({
    app: 'orders',
    connection: redis,
    prefix: nest.prefix,
    worker: { runtime },
    maxPayloadBytes: 1_024,
    ...extra,
  });

  async function start(imports: unknown[], setup: { platform?: 'express' | 'fastify'; controllers?: unknown[] } = {}): Promise<INestApplication> {
    const adapter = setup.platform === 'fastify' ? new FastifyAdapter() : undefined;
    const app = await nest.start({ imports: imports as never[], providers: [OrderWorkflows], controllers: (setup.controllers ?? []) as never[] }, { adapter });
    if (adapter) await fastifyReady(app);
    return app;
  }

  it('is global by default: a feature module injects RedflowClient without importing RedflowModule; isGlobal: false keeps it local', async () => {
    await start([RedflowModule.forRoot(options({ worker: false })), ReportsModule]);
    expect(nest.app!.get(Reports).client).toBe(nest.app!.get(RedflowClient));
    await nest.app!.close();
    nest.app = undefined;
    await expect(start([RedflowModule.forRoot({ ...options({ worker: false }), isGlobal: false }), ReportsModule])).rejects.toThrow(
      /can't resolve dependencies of the Reports \(\?\)/,
    );
  });

  it('forRootAsync is global by default too, and isGlobal: false keeps it local', async () => {
    await start([RedflowModule.forRootAsync({ useFactory: () => options({ worker: false }) }), ReportsModule]);
    expect(nest.app!.get(Reports).client).toBe(nest.app!.get(RedflowClient));
    await nest.app!.close();
    nest.app = undefined;
    await expect(start([RedflowModule.forRootAsync({ useFactory: () => options({ worker: false }), isGlobal: false }), ReportsModule])).rejects.toThrow(
      /can't resolve dependencies of the Reports \(\?\)/,
    );
  });

  it('@InjectWorkflow gives a typed handle with run, runMany, get, list and count', async () => {
    await start([RedflowModule.forRoot(options()), OrdersModule]);
    const { place } = nest.app!.get(Orders);
    expect(place.name).toBe('place-order');
    const one = await place.run({ qty: 2 });
    await expect(one.result({ timeoutMs: 5_000 })).resolves.toEqual({ placed: 2 });

    const many = await place.runMany([{ input: { qty: 3 } }, { input: { qty: 4 }, options: { idempotencyKey: 'k-4' } }]);
    await expect(Promise.all(many.map((h) => h.result({ timeoutMs: 5_000 })))).resolves.toEqual([{ placed: 3 }, { placed: 4 }]);
    // One bad item: nothing of the batch is stored, and the error names the item.
    await expect(place.runMany([{ input: { qty: 5 } }, { input: { qty: 0 } }])).rejects.toThrow(
      'The input of item 1 of runMany for workflow "place-order" is invalid: qty: qty must not be less than 1.',
    );
    expect(await place.count()).toBe(3);
    expect(await place.count({ status: 'succeeded' })).toBe(3);
    expect((await place.list()).map((r) => r.output).sort((a, b) => a!.placed - b!.placed)).toEqual([{ placed: 2 }, { placed: 3 }, { placed: 4 }]);
    expect((await place.get(one.id))?.output).toEqual({ placed: 2 });
    // A run of another workflow is not this handle's.
    const other = await nest.app!.get(RedflowClient).run(OrderWorkflows, 'other', {});
    expect(await place.get(other.id)).toBeNull();
  });

  it('schedules a workflow by its typed handle or by class and method, the input type-checked', async () => {
    await start([RedflowModule.forRoot(options({ worker: false })), OrdersModule]);
    const { place } = nest.app!.get(Orders);
    const client = nest.app!.get(RedflowClient);
    expect(await place.schedule('nightly-order', { cron: '0 3 * * *', input: { qty: 2 } })).toMatchObject({
      id: 'nightly-order',
      workflow: 'place-order',
      cron: '0 3 * * *',
      input: { qty: 2 },
    });
    expect(await client.schedule('hourly-other', OrderWorkflows, 'other', { every: '1h' })).toMatchObject({ workflow: 'other-order', every: 3_600_000 });
    expect((await client.listSchedules()).map((s) => `${s.id}:${s.workflow}`).sort()).toEqual(['hourly-other:other-order', 'nightly-order:place-order']);
    // The input is the workflow's, and the method a @Workflow method: both checked by the compiler.
    // @ts-expect-error qty is a number in OrderDto
    await expect(place.schedule('bad', { every: '1h', input: { qty: 'two' } })).rejects.toThrow('qty');
    // @ts-expect-error "format" is not a @Workflow method of OrderWorkflows
    await expect(client.schedule('bad', OrderWorkflows, 'format', { every: '1h' })).rejects.toThrow('OrderWorkflows.format is not a @Workflow method');
  });

  it('injects RedflowSchedules, which pauses, lists and previews a @Cron trigger with its policies', async () => {
    @Injectable()
    class Digests {
      @Cron('0 6 * * *', { id: 'morning-digest', timezone: 'UTC', overlap: 'buffer-one', missed: 'skip' })
      @Workflow('morning-digest')
      async digest(_ctx: WorkflowContext) {
        return 'sent';
      }
    }
    const app = await nest.start({ imports: [RedflowModule.forRoot(options())], providers: [Digests] });
    const schedules = app.get(RedflowSchedules);
    expect(await schedules.get('morning-digest')).toMatchObject({
      id: 'morning-digest',
      source: 'definition',
      workflow: 'morning-digest',
      policies: { overlap: 'buffer-one', missed: 'skip' },
      nextAt: expect.any(Number),
    });
    const paused = await schedules.pause('morning-digest', { note: 'mail provider outage' });
    expect(paused).toMatchObject({ paused: { note: 'mail provider outage' } });
    expect(paused.nextAt).toBeUndefined();
    const [next] = await schedules.preview('morning-digest', 1, Date.UTC(2027, 0, 1));
    expect(next.toISOString()).toBe('2027-01-01T06:00:00.000Z');
    expect((await schedules.resume('morning-digest')).paused).toBeUndefined();
  });

  it('forFeature names a class without @Workflow methods', () => {
    class NotWorkflows {}
    expect(() => RedflowModule.forFeature(NotWorkflows)).toThrow(
      'NotWorkflows, given to RedflowModule.forFeature(), has no @Workflow method. Decorate its workflow methods with @Workflow().',
    );
  });

  it('forFeature takes an array of classes or the classes one by one, and names a wrong entry', () => {
    const tokens = (m: ReturnType<typeof RedflowModule.forFeature>) => m.exports;
    expect(tokens(RedflowModule.forFeature([OrderWorkflows]))).toEqual(tokens(RedflowModule.forFeature(OrderWorkflows)));
    expect(tokens(RedflowModule.forFeature([OrderWorkflows]))).toHaveLength(3); // place, limited, other
    expect(() => RedflowModule.forFeature([OrderWorkflows, 'orders' as never])).toThrow(
      'RedflowModule.forFeature() takes provider classes with @Workflow methods (forFeature([A, B]) or forFeature(A, B)), got string.',
    );
  });

  it.each(['express', 'fastify'] as const)("maps this library's errors thrown from a controller to HTTP statuses on %s", async (platform) => {
    await start([RedflowModule.forRoot(options())], { platform, controllers: [OrdersController] });
    const http = () => request(nest.app!.getHttpServer());
    // 400 with the validator's messages; nothing stored.
    const invalid = await http().post('/orders').send({ qty: 0 }).expect(400);
    expect(invalid.body).toEqual({ statusCode: 400, error: 'Bad Request', message: ['qty: qty must not be less than 1'] });
    // 404: an unknown workflow (in Nest terms) and a missing run.
    const unknown = await http().post('/orders/by-name/no-such-workflow').expect(404);
    expect(unknown.body.message).toMatch(
      /^Workflow "no-such-workflow" is not registered in this process or in Redis\. Decorate a provider method with @Workflow\(\)/,
    );
    expect((await http().get('/orders/runs/missing-run').expect(404)).body.message).toMatch(/^Run "missing-run" does not exist/);
    // 409 with the existing run's id.
    const created = await http().post('/orders').send({ qty: 1, key: 'same' }).expect(201);
    const conflict = await http().post('/orders').send({ qty: 2, key: 'same' }).expect(409);
    expect(conflict.body).toMatchObject({ statusCode: 409, error: 'Conflict', runId: created.body.id });
    // 413 over maxPayloadBytes (1 KiB here).
    expect(
      (
        await http()
          .post('/orders/by-name/other-order')
          .send({ blob: 'x'.repeat(2_000) })
          .expect(413)
      ).body.error,
    ).toBe('Payload Too Large');
    // 429: the second run within the workflow's rate limit failed with RateLimitExceededError.
    expect((await http().post('/orders/limited').expect(429)).body.error).toBe('Too Many Requests');
    // 503 without Redis details; any other error is Nest's own 500.
    expect((await http().get('/orders/down').expect(503)).body).toEqual({
      statusCode: 503,
      error: 'Service Unavailable',
      message: 'Workflow storage is unavailable. Retry later.',
    });
    expect((await http().get('/orders/plain-error').expect(500)).body).toEqual({ statusCode: 500, message: 'Internal server error' });
    expect(await nest.app!.get(RedflowClient).countRuns({ workflow: 'place-order' })).toBe(1);
  });

  it("exceptionFilter: false leaves this library's errors to Nest (500)", async () => {
    await start([RedflowModule.forRoot({ ...options(), exceptionFilter: false })], { controllers: [OrdersController] });
    await request(nest.app!.getHttpServer()).post('/orders').send({ qty: 0 }).expect(500);
  });

  it('the events option reaches the client: events: false writes no stream entries', async () => {
    await start([RedflowModule.forRoot(options({ events: false }))]);
    const client = nest.app!.get(RedflowClient);
    await expect((await client.run(OrderWorkflows, 'other', {})).result({ timeoutMs: 5_000 })).resolves.toBe('other');
    expect(await redis.exists(client.keys.events())).toBe(0);
    await expect(start([RedflowModule.forRoot(options({ events: { maxLen: 0 } }))])).rejects.toThrow(/RedflowModule option "events"\.maxLen/);
  });

  it('UnknownWorkflowError tells a Nest user about @Workflow, not defineWorkflow', async () => {
    await start([RedflowModule.forRoot(options({ worker: false }))]);
    const error = await nest
      .app!.get(RedflowClient)
      .runByName('nope', {})
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(UnknownWorkflowError);
    expect((error as Error).message).toContain('Decorate a provider method with @Workflow()');
    expect((error as Error).message).not.toContain('defineWorkflow');
  });
});

/** Compile-time checks: `npm run typecheck` fails if a wrong call compiles. */
export function typedWorkflowChecks(client: RedflowClient, place: WorkflowRefOf<OrderWorkflows, 'place'>): void {
  void client.run(OrderWorkflows, 'place', { qty: 1 });
  void client.run(OrderWorkflows, 'limited', {});
  // @ts-expect-error an onFailure target is not a workflow
  void client.run(OrderWorkflows, 'orderFailed', {});
  // @ts-expect-error a helper taking something else is not a workflow
  void client.run(OrderWorkflows, 'format', 1);
  // @ts-expect-error a zero-argument helper is not a workflow
  void client.run(OrderWorkflows, 'now', {});
  // @ts-expect-error a lifecycle hook is not a workflow
  void client.run(OrderWorkflows, 'onModuleInit', {});
  void place.run({ qty: 1 }).then(async (h) => {
    const placed: number = (await h.result()).placed;
    // @ts-expect-error the output is typed
    const wrong: string = (await h.result()).placed;
    return [placed, wrong];
  });
  // @ts-expect-error the input is typed
  void place.run({ qty: 'one' });
  // @ts-expect-error runMany items are typed
  void place.runMany([{ input: { qty: 'one' } }]);
}
