import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace } from '@opentelemetry/api';
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';

import { ConfigurationError, createClient, NonRetriableError, type RedflowTracing, type WorkflowClient, type WorkflowContext } from '../../lib';
import { redflowTracing } from '../../lib/otel';
import { countScriptCalls, eventually, TestEngine } from '../support/engine';

/** A logger that keeps its lines. */
function captureLogger() {
  const lines: string[] = [];
  const push = (message: string) => void lines.push(message);
  return { lines, log: push, warn: push, error: push };
}

/**
 * OpenTelemetry tracing (`nestjs-redflow/otel`) with the SDK's in-memory exporter: a span per run
 * attempt and per step try, children of the trace context stored with the run when it started.
 */
describe('tracing with OpenTelemetry', () => {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  const tracer = provider.getTracer('test');
  let engine: TestEngine;
  let client: WorkflowClient;

  beforeAll(() => context.setGlobalContextManager(contextManager.enable()));
  afterAll(() => context.disable());
  beforeEach(async () => {
    exporter.reset();
    engine = new TestEngine();
    // The producer's client and the worker both trace, on the same provider.
    client = createClient({
      redis: engine.redis,
      prefix: engine.prefix,
      registry: engine.registry,
      clock: engine.clock,
      tracing: redflowTracing({ tracerProvider: provider }),
    });
    await engine.worker({ tracing: redflowTracing({ tracerProvider: provider }) });
  });
  afterEach(async () => {
    await client.close();
    await engine.close();
  });

  const spans = (prefix: string) => exporter.getFinishedSpans().filter((s) => s.name.startsWith(prefix));
  const idOf = (span: ReadableSpan) => span.spanContext().spanId;
  const traceOf = (span: ReadableSpan) => span.spanContext().traceId;
  const runHash = (id: string) => engine.redis.hgetall(client.keys.run(id));

  it('gives a run with two steps one run span and two step spans, children of it, with redflow.* attributes', async () => {
    const wf = engine.define('checkout', { queue: 'orders' }, async ({ input, step }: WorkflowContext<{ id: string }>) => {
      const charged = await step.run('charge', () => `charged ${input.id}`);
      return step.run('ship', () => `${charged}, shipped`);
    });
    await engine.worker({ queues: ['orders'], tracing: redflowTracing({ tracerProvider: provider }) });
    const handle = await client.start(wf, { id: 'o-1' });
    expect(await handle.result({ timeoutMs: 5_000 })).toBe('charged o-1, shipped');
    await eventually(() => spans('redflow.run').length === 1);

    const [run] = spans('redflow.run');
    expect(run.name).toBe('redflow.run checkout');
    expect(run.kind).toBe(SpanKind.CONSUMER);
    expect(run.attributes).toEqual({
      'redflow.run.id': handle.id,
      'redflow.run.attempt': 1,
      'redflow.workflow': 'checkout',
      'redflow.queue': 'orders',
      'redflow.outcome': 'succeeded',
    });
    expect(run.status.code).toBe(SpanStatusCode.UNSET);
    // Started with no active span: the run is a trace of its own.
    expect(run.parentSpanContext).toBeUndefined();

    const steps = spans('redflow.step');
    expect(steps.map((s) => s.name)).toEqual(['redflow.step charge', 'redflow.step ship']);
    for (const [i, step] of steps.entries()) {
      expect(traceOf(step)).toBe(traceOf(run));
      expect(step.parentSpanContext?.spanId).toBe(idOf(run));
      expect(step.attributes).toEqual({
        'redflow.run.id': handle.id,
        'redflow.run.attempt': 1,
        'redflow.workflow': 'checkout',
        'redflow.queue': 'orders',
        'redflow.step.name': ['charge', 'ship'][i],
        'redflow.step.attempt': 1,
        'redflow.outcome': 'succeeded',
      });
    }
    // Nothing was active at start: nothing is stored.
    const hash = await runHash(handle.id);
    expect(hash.traceparent).toBeUndefined();
    expect(hash.tracestate).toBeUndefined();
  });

  it('records the exception and ERROR status on a failing step and on the attempt it fails; a user span in a step is its child', async () => {
    const wf = engine.define('pay', {}, async ({ step }: WorkflowContext) => {
      await step.run('authorize', () =>
        tracer.startActiveSpan('bank.call', (span) => {
          span.end();
          return 'ok';
        }),
      );
      return step.run('capture', () => {
        throw new NonRetriableError('card declined');
      });
    });
    const handle = await client.start(wf, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('card declined');
    await eventually(() => spans('redflow.run').length === 1);

    const [run] = spans('redflow.run');
    const [authorize, capture] = spans('redflow.step');
    const [bankCall] = spans('bank.call');
    expect(bankCall.parentSpanContext?.spanId).toBe(idOf(authorize));

    expect(capture.status).toEqual({ code: SpanStatusCode.ERROR, message: 'NonRetriableError: card declined' });
    expect(capture.attributes['redflow.outcome']).toBe('failed');
    expect(capture.events.map((e) => [e.name, e.attributes?.['exception.type'], e.attributes?.['exception.message']])).toEqual([
      ['exception', 'NonRetriableError', 'card declined'],
    ]);
    expect(run.status).toEqual({ code: SpanStatusCode.ERROR, message: 'NonRetriableError: card declined' });
    expect(run.attributes['redflow.outcome']).toBe('failed');
    expect(run.events.map((e) => e.attributes?.['exception.message'])).toEqual(['card declined']);
    expect(authorize.status.code).toBe(SpanStatusCode.UNSET);
  });

  it('gives a step try that is retried its own span, with redflow.step.attempt counting the tries', async () => {
    let tries = 0;
    const wf = engine.define('flaky', {}, async ({ step }: WorkflowContext) =>
      step.run({ name: 'call', retries: { maxAttempts: 3, delay: 1 } }, () => {
        if (++tries < 3) throw new Error(`busy ${tries}`);
        return 'done';
      }),
    );
    expect(await (await client.start(wf, {})).result({ timeoutMs: 5_000 })).toBe('done');
    await eventually(() => spans('redflow.run').length === 1);
    expect(spans('redflow.step').map((s) => [s.attributes['redflow.step.attempt'], s.attributes['redflow.outcome'], s.status.code])).toEqual([
      [1, 'retry', SpanStatusCode.ERROR],
      [2, 'retry', SpanStatusCode.ERROR],
      [3, 'succeeded', SpanStatusCode.UNSET],
    ]);
  });

  it('stores the trace context active at start, and makes the run span a child of that span', async () => {
    const wf = engine.define('greet', {}, async ({ input, step }: WorkflowContext<string>) => step.run('compose', () => `Hello ${input}`));
    const request = tracer.startSpan('POST /greetings');
    const handle = await context.with(trace.setSpan(ROOT_CONTEXT, request), () => client.start(wf, 'Ada'));
    request.end();
    expect(await handle.result({ timeoutMs: 5_000 })).toBe('Hello Ada');
    await eventually(() => spans('redflow.run').length === 1);

    const [run] = spans('redflow.run');
    expect(traceOf(run)).toBe(request.spanContext().traceId);
    expect(run.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
    expect(run.parentSpanContext?.isRemote).toBe(true);
    const hash = await runHash(handle.id);
    expect(hash.traceparent).toBe(`00-${request.spanContext().traceId}-${request.spanContext().spanId}-01`);
    expect(hash.tracestate).toBeUndefined();
  });

  it('stores and reads the trace context in the calls a run makes anyway: no extra Redis command', async () => {
    const wf = engine.define('count', {}, async ({ step }: WorkflowContext) => step.run('one', () => 1));
    await engine.client.start(wf, {}).then((h) => h.result({ timeoutMs: 5_000 })); // warm up: scripts loaded
    const runIds: string[] = [];
    const commands = async (start: () => Promise<{ id: string }>) => {
      const counts = countScriptCalls(engine.redis);
      const handle = await start();
      runIds.push(handle.id);
      await engine.client.waitForRun(handle.id, { timeoutMs: 5_000 });
      const copy = { ...counts };
      // countScriptCalls wraps sendCommand with an own property: removing it restores the prototype's.
      delete (engine.redis as unknown as { sendCommand?: unknown }).sendCommand;
      return copy;
    };
    const untraced = await commands(() => engine.client.start(wf, {}));
    const request = tracer.startSpan('POST /count');
    const traced = await commands(() => context.with(trace.setSpan(ROOT_CONTEXT, request), () => client.start(wf, {})));
    request.end();
    // The run's own calls (claims and promotions depend on the worker loop's timing, and the new client checks Redis's config once).
    const pick = (c: Record<string, number>) => ({
      enqueue: c.enqueue,
      checkpoint: c.checkpoint,
      finish: c.finish,
      hset: c.hset,
      hget: c.hget,
      hgetall: c.hgetall,
    });
    expect(pick(traced)).toEqual(pick(untraced));
    expect(pick(traced)).toEqual({ enqueue: 1, checkpoint: undefined, finish: 1, hset: undefined, hget: undefined, hgetall: undefined });
    expect((await engine.redis.hgetall(client.keys.run(runIds.at(-1)!))).traceparent).toBe(
      `00-${request.spanContext().traceId}-${request.spanContext().spanId}-01`,
    );
  });

  it('keeps the trace across a wait: the suspended attempt ends normally, the resumed one is a child of the same start', async () => {
    const wf = engine.define('approve', {}, async ({ step }: WorkflowContext) => {
      await step.run('request', () => 'requested');
      const decision = await step.waitForSignal<{ ok: boolean }>('decision', 'decision');
      return step.run('apply', () => (decision?.ok ? 'approved' : 'rejected'));
    });
    const request = tracer.startSpan('POST /approvals');
    const handle = await context.with(trace.setSpan(ROOT_CONTEXT, request), () => client.start(wf, {}));
    request.end();
    await engine.runUntilWaiting(handle.id);
    await eventually(() => spans('redflow.run').length === 1);
    expect(await engine.signal(handle.id, 'decision', { ok: true })).toBe(true);
    expect(await handle.result({ timeoutMs: 5_000 })).toBe('approved');
    await eventually(() => spans('redflow.run').length === 2);

    const [suspended, resumed] = spans('redflow.run');
    for (const run of [suspended, resumed]) {
      expect(traceOf(run)).toBe(request.spanContext().traceId);
      expect(run.parentSpanContext?.spanId).toBe(request.spanContext().spanId);
      expect(run.attributes['redflow.run.attempt']).toBe(1);
    }
    expect(suspended.attributes['redflow.run.suspended']).toBe(true);
    expect(suspended.attributes['redflow.outcome']).toBe('suspended');
    expect(suspended.status.code).toBe(SpanStatusCode.UNSET);
    expect(resumed.attributes['redflow.run.suspended']).toBeUndefined();
    expect(resumed.attributes['redflow.outcome']).toBe('succeeded');
    // The replayed step does not run again: one span for it, in the first attempt.
    expect(spans('redflow.step').map((s) => [s.name, s.parentSpanContext?.spanId])).toEqual([
      ['redflow.step request', idOf(suspended)],
      ['redflow.step apply', idOf(resumed)],
    ]);
  });

  it('gives a child run the trace context of the parent attempt', async () => {
    const child = engine.define('child', {}, async ({ input }: WorkflowContext<number>) => input * 2);
    const parent = engine.define('parent', {}, async ({ step }: WorkflowContext) => step.runWorkflow('double', child, 21));
    const handle = await client.start(parent, {});
    expect(await handle.result({ timeoutMs: 5_000 })).toBe(42);
    await eventually(() => spans('redflow.run child').length === 1 && spans('redflow.run parent').length === 2);
    const [childRun] = spans('redflow.run child');
    const [parentFirst] = spans('redflow.run parent');
    expect(traceOf(childRun)).toBe(traceOf(parentFirst));
    expect(childRun.parentSpanContext?.spanId).toBe(idOf(parentFirst));
  });
});

describe('tracing guarantees', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('runs a workflow unharmed when every call of the tracer throws, and logs it', async () => {
    const logger = captureLogger();
    const broken: RedflowTracing = {
      inject: () => {
        throw new Error('propagator down');
      },
      startAttempt: () => ({
        activate: () => {
          throw new Error('context manager down');
        },
        startStep: () => ({
          activate: (fn) => {
            const result = fn();
            throw new Error(`after ${typeof result}`);
          },
          startStep: () => undefined,
          end: () => {
            throw new Error('exporter down');
          },
        }),
        end: () => {
          throw new Error('exporter down');
        },
      }),
    };
    const client = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, tracing: broken, logger });
    try {
      let calls = 0;
      const wf = engine.define('sturdy', {}, async ({ step }: WorkflowContext) => {
        const a = await step.run('a', () => ++calls);
        const b = await step.run('b', () => ++calls);
        return a + b;
      });
      await engine.worker({ tracing: broken, logger });
      const handle = await client.start(wf, {});
      expect(await handle.result({ timeoutMs: 5_000 })).toBe(3);
      // Each step function ran once, though the tracer threw after calling it.
      expect(calls).toBe(2);
      expect(logger.lines.filter((l) => l.startsWith('Tracing'))).toEqual([
        'Tracing inject() threw: propagator down. The run is not affected; further tracing errors within a minute are not logged.',
        'Tracing activate() threw: context manager down. The run is not affected; further tracing errors within a minute are not logged.',
      ]);
    } finally {
      await client.close();
    }
  });

  it('stores only a well-formed, length-bounded trace context', async () => {
    const wf = engine.define('plain', {}, async () => 'ok');
    const cases: Array<[unknown, Record<string, string>]> = [
      [
        { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=abc' },
        { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: 'vendor=abc' },
      ],
      [
        { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01', tracestate: `v=${'x'.repeat(600)}` },
        { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      ],
      [{ traceparent: '00-00000000000000000000000000000000-b7ad6b7169203331-01' }, {}],
      [{ traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nx' }, {}],
      [{ traceparent: `00-${'a'.repeat(10_000)}` }, {}],
      ['not an object', {}],
    ];
    for (const [injected, stored] of cases) {
      const tracing: RedflowTracing = { inject: () => injected as never, startAttempt: () => undefined };
      const client = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, tracing });
      try {
        const handle = await client.start(wf, {});
        const hash = await engine.redis.hgetall(client.keys.run(handle.id));
        expect([injected, { traceparent: hash.traceparent, tracestate: hash.tracestate }]).toEqual([
          injected,
          { traceparent: stored.traceparent, tracestate: stored.tracestate },
        ]);
      } finally {
        await client.close();
      }
    }
  });

  it('refuses a tracing option that is not a tracing integration, and bad redflowTracing options', () => {
    expect(() => createClient({ redis: engine.redis, prefix: engine.prefix, tracing: {} as never })).toThrow(ConfigurationError);
    expect(() => createClient({ redis: engine.redis, prefix: engine.prefix, tracing: {} as never })).toThrow(
      'createClient option "tracing" must be a tracing integration with inject() and startAttempt(), such as redflowTracing() from "nestjs-redflow/otel", got an object.',
    );
    expect(() => redflowTracing({ tracerName: '' })).toThrow('redflowTracing option "tracerName" must be a non-empty string');
    expect(() => redflowTracing({ tracerProvider: {} as never })).toThrow('redflowTracing option "tracerProvider" must be an OpenTelemetry TracerProvider');
    expect(() => redflowTracing({ sampler: 1 } as never)).toThrow(ConfigurationError);
  });
});

describe('tracing with @opentelemetry/api and no SDK registered', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('runs workflows as usual and stores no trace context', async () => {
    // No tracer provider and no context manager: what an app with only the API installed has.
    const tracing = redflowTracing();
    const client = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, tracing });
    try {
      const wf = engine.define('untraced', {}, async ({ input, step }: WorkflowContext<number>) => {
        const doubled = await step.run('double', () => input * 2);
        await step.waitForSignal('go', 'go');
        return step.run('add', () => doubled + 1);
      });
      await engine.worker({ tracing });
      const handle = await trace.getTracer('app').startActiveSpan('request', (span) => {
        span.end();
        return client.start(wf, 20);
      });
      await engine.runUntilWaiting(handle.id);
      expect(await engine.signal(handle.id, 'go')).toBe(true);
      expect(await handle.result({ timeoutMs: 5_000 })).toBe(41);
      const hash = await engine.redis.hgetall(client.keys.run(handle.id));
      expect(Object.keys(hash).filter((k) => k.startsWith('trace'))).toEqual([]);
    } finally {
      await client.close();
    }
  });
});
