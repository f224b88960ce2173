import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Body, Controller, Injectable, Post, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { context, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import request from 'supertest';

import { ConfigurationError, createAdmin, createClient, RedflowClient, RedflowModule, Step, Workflow, type WorkflowContext } from '../../lib';
import { redflowTracing } from '../../lib/otel';
import { connect, eventually } from '../support/engine';

@Injectable()
class OrderWorkflows {
  @Workflow({ name: 'place-order', maxConcurrency: Infinity })
  async place({ input }: WorkflowContext<{ id: string }>) {
    const reserved = await this.reserve(input.id);
    return { receipt: await this.charge(reserved) };
  }

  @Step('reserve')
  async reserve(id: string) {
    return `reserved ${id}`;
  }

  @Step('charge')
  async charge(reserved: string) {
    return `charged (${reserved})`;
  }
}

@Controller('orders')
class OrdersController {
  constructor(private readonly redflow: RedflowClient) {}

  @Post()
  async place(@Body() body: { id: string }) {
    const handle = await this.redflow.run(OrderWorkflows, 'place', body);
    return { runId: handle.id };
  }
}

/**
 * `RedflowModule.forRoot({ tracing: redflowTracing() })` in a real Nest app: a run started by a
 * controller, while the request's span is active (as HTTP instrumentation makes it), is traced as
 * that request's child.
 */
describe('tracing in a Nest app', () => {
  const redis = connect();
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const tracer = provider.getTracer('http');
  let app: INestApplication | undefined;
  let prefix: string;

  beforeAll(() => context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable()));
  afterAll(async () => {
    context.disable();
    await redis.quit();
  });
  beforeEach(() => {
    exporter.reset();
    prefix = `test:nest:${randomBytes(4).toString('hex')}`;
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await createAdmin(createClient({ redis, prefix })).resetState();
  });

  it('traces a run started in a controller as a child of the request span, with a span per step', async () => {
    const module = await Test.createTestingModule({
      imports: [
        RedflowModule.forRoot({
          app: 'orders',
          connection: redis,
          prefix,
          tracing: redflowTracing({ tracerProvider: provider }),
          worker: { runtime: { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 } },
        }),
      ],
      controllers: [OrdersController],
      providers: [OrderWorkflows],
    }).compile();
    app = module.createNestApplication({ logger: false });
    // What HTTP instrumentation does: the request is handled with its server span active.
    app.use((req: IncomingMessage, res: ServerResponse, next: () => void) => {
      const span = tracer.startSpan(`${req.method} ${req.url}`);
      res.on('finish', () => span.end());
      context.with(trace.setSpan(context.active(), span), next);
    });
    await app.init();

    const response = await request(app.getHttpServer()).post('/orders').send({ id: 'o-7' }).expect(201);
    const runId = (response.body as { runId: string }).runId;
    expect(await app.get(RedflowClient).waitForRun(runId, { timeoutMs: 5_000 })).toEqual({ receipt: 'charged (reserved o-7)' });
    await eventually(
      () => exporter.getFinishedSpans().some((s) => s.name === 'redflow.run place-order') && exporter.getFinishedSpans().some((s) => s.name === 'POST /orders'),
    );

    const finished = exporter.getFinishedSpans();
    const http = finished.find((s) => s.name === 'POST /orders')!;
    const run = finished.find((s) => s.name === 'redflow.run place-order')!;
    expect(run.spanContext().traceId).toBe(http.spanContext().traceId);
    expect(run.parentSpanContext?.spanId).toBe(http.spanContext().spanId);
    expect(run.attributes).toMatchObject({ 'redflow.run.id': runId, 'redflow.workflow': 'place-order', 'redflow.queue': 'default', 'redflow.run.attempt': 1 });
    expect(run.status.code).toBe(SpanStatusCode.UNSET);
    const steps = finished.filter((s) => s.name.startsWith('redflow.step'));
    expect(steps.map((s) => [s.name, s.spanContext().traceId, s.parentSpanContext?.spanId])).toEqual([
      ['redflow.step reserve', http.spanContext().traceId, run.spanContext().spanId],
      ['redflow.step charge', http.spanContext().traceId, run.spanContext().spanId],
    ]);
  });

  it('refuses a tracing option that is not a tracing integration, naming the fix', async () => {
    const compile = () =>
      Test.createTestingModule({ imports: [RedflowModule.forRoot({ app: 'orders', connection: redis, prefix, tracing: 'otel' as never })] }).compile();
    await expect(compile()).rejects.toThrow(ConfigurationError);
    await expect(compile()).rejects.toThrow(
      'RedflowModule option "tracing" must be a tracing integration with inject() and startAttempt(), such as redflowTracing() from "nestjs-redflow/otel", got "otel".',
    );
  });
});
