import { Redis } from 'ioredis';

import {
  ConfigurationError,
  createClient,
  RUN_EVENT_TYPES,
  type RedisConnection,
  type RunEvent,
  type RunEventsOptions,
  type RunEventType,
  type WorkflowContext,
} from '../../lib';
import { RunEventStream } from '../../lib/core/client/run-events-reader';
import { clusterMode, eventually, TestEngine } from '../support/engine';
import { OwnRedis } from '../support/own-redis';

/**
 * The event stream: every script that moves a run writes one small entry to `{prefix}:events`
 * (trimmed to about `events.maxLen`), and `client.events()` reads it with backpressure.
 */
describe('run event stream', () => {
  let engine: TestEngine;
  let streams: RunEventStream[] = [];
  beforeEach(() => (engine = new TestEngine()));
  afterEach(async () => {
    await Promise.all(streams.map((s) => s.close()));
    streams = [];
    await engine.close();
  });

  /** A reader closed after the test even when the test fails. */
  const open = (options?: RunEventsOptions) => {
    const stream = engine.client.events(options);
    streams.push(stream);
    return stream;
  };

  /** Collects the events of a reader until `done` says so. */
  async function collect(stream: AsyncIterable<RunEvent>, done: (events: RunEvent[]) => boolean): Promise<RunEvent[]> {
    const events: RunEvent[] = [];
    for await (const event of stream) {
      events.push(event);
      if (done(events)) break;
    }
    return events;
  }

  const typesOf = (events: RunEvent[], runId: string) => events.filter((e) => e.runId === runId).map((e) => e.type);

  it('tells every transition of real runs: steps, failure, retry, sleep, signal, event, resume, cancel, terminate', async () => {
    let tries = 0;
    const order = engine.registry.define(
      'order',
      { retries: { maxAttempts: 2, delay: 20 }, stepRetries: { maxAttempts: 1 } },
      async ({ step }: WorkflowContext<unknown>) => {
        await step.run('reserve', () => 'r');
        await step.sleep('nap', 30);
        const ok = await step.waitForSignal<boolean>('approve', 'approval');
        await step.run('charge', () => {
          tries++;
          if (tries === 1) throw new Error('card declined');
          return ok;
        });
        return 'done';
      },
    );
    const broken = engine.registry.define('broken', {}, async () => {
      throw new Error('boom');
    });
    const idle = engine.registry.define('idle', {}, async ({ step }) => step.waitForSignal('never', 'never'));
    const listener = engine.registry.define('listener', {}, async ({ step }) => step.waitForEvent('paid', 'order.paid', { match: { orderId: 7 } }));
    const stream = open();
    await stream.ready;
    await engine.worker();
    const run = await engine.client.start(order, {});
    await eventually(async () => (await engine.client.getRunSteps(run.id)).some((s) => s.name === 'approve' && s.status === 'waiting'));
    expect(await engine.client.signal(run.id, 'approval', true)).toBe(true);
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('done');
    const failed = await engine.client.start(broken, {});
    await expect(failed.result({ timeoutMs: 5_000 })).rejects.toThrow('boom');
    expect(await engine.client.resume(failed.id)).toBe(true);
    await eventually(async () => (await engine.client.getRun(failed.id))?.status === 'failed');
    const listening = await engine.client.start(listener, {});
    await eventually(async () => (await engine.client.getRun(listening.id))?.status === 'scheduled');
    await engine.client.emitEvent('order.paid', { orderId: 7 });
    await expect(listening.result({ timeoutMs: 5_000 })).resolves.toEqual({ orderId: 7 });
    const waiting = await engine.client.start(idle, {});
    await eventually(async () => (await engine.client.getRun(waiting.id))?.status === 'scheduled');
    await engine.client.cancelRun(waiting.id);
    const stuck = await engine.client.start(idle, {});
    await eventually(async () => (await engine.client.getRun(stuck.id))?.status === 'scheduled');
    expect(await engine.client.terminate(stuck.id, { reason: 'stuck' })).toBe(true);

    const events = await collect(stream, (all) => all.some((e) => e.type === 'run.terminated'));
    const seen = new Set(events.map((e) => e.type));
    // The compensation events (run.compensating, run.compensation_failed) are told in sagas.spec.ts.
    expect(RUN_EVENT_TYPES.filter((t) => !seen.has(t) && !t.startsWith('run.compensat'))).toEqual([]);
    expect(typesOf(events, run.id)).toEqual([
      'run.created',
      'run.started',
      'step.completed', // reserve
      'run.waiting', // nap
      'run.started', // the nap's and the signal's records are resolved by scripts, not run as steps
      'run.waiting', // approve
      'run.signaled',
      'run.started',
      'step.failed', // charge
      'retry.scheduled',
      'run.started',
      'step.completed', // charge
      'run.completed',
    ]);
    const of = (type: RunEventType, runId = run.id) => events.filter((e) => e.type === type && e.runId === runId);
    expect(of('run.waiting').map((e) => e.waitingFor)).toEqual(['sleep', 'signal']);
    expect(of('run.signaled')[0]).toMatchObject({ signal: 'approval', workflow: 'order' });
    expect(of('step.failed')[0]).toMatchObject({ step: 'charge', attempt: 1, error: 'card declined' });
    expect(of('retry.scheduled')[0]).toMatchObject({ attempt: 1, error: 'card declined', retryAt: expect.any(Number) });
    expect(of('run.started').map((e) => e.attempt)).toEqual([1, 1, 1, 2]);
    expect(of('run.failed', failed.id)[0]).toMatchObject({ workflow: 'broken', error: 'boom' });
    expect(typesOf(events, failed.id)).toEqual(['run.created', 'run.started', 'run.failed', 'run.resumed', 'run.started', 'run.failed']);
    expect(typesOf(events, listening.id)).toEqual(['run.created', 'run.started', 'run.waiting', 'run.signaled', 'run.started', 'run.completed']);
    expect(of('run.waiting', listening.id)[0]).toMatchObject({ waitingFor: 'event' });
    expect(of('run.signaled', listening.id)[0]).toMatchObject({ event: 'order.paid', workflow: 'listener' });
    expect(of('run.signaled', listening.id)[0].signal).toBeUndefined();
    expect(of('run.canceled', waiting.id)).toHaveLength(1);
    expect(typesOf(events, stuck.id)).toEqual(['run.created', 'run.started', 'run.waiting', 'run.terminated']);
    expect(of('run.terminated', stuck.id)[0]).toMatchObject({ workflow: 'idle', error: `Run "${stuck.id}" was terminated: stuck.` });
    for (const e of events) {
      expect(e.at).toBeGreaterThan(Date.now() - 60_000);
      expect(JSON.stringify(e)).not.toContain('"r"');
    }
    // break closed the reader.
    expect(stream.buffered).toBe(0);
  });

  it('tells a step retry (the default policy) as step.failed, then retry.scheduled naming the step, then the run waiting for it', async () => {
    let tries = 0;
    const flaky = engine.registry.define('flaky-step', {}, async ({ step }) =>
      step.run('charge', () => {
        if (++tries === 1) throw new Error('card network down');
        return 'charged';
      }),
    );
    const stream = open();
    await stream.ready;
    await engine.worker();
    const run = await engine.client.start(flaky, {});
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('charged');
    const events = await collect(stream, (all) => all.some((e) => e.type === 'run.completed' && e.runId === run.id));
    expect(typesOf(events, run.id)).toEqual([
      'run.created',
      'run.started',
      'step.failed',
      'retry.scheduled',
      'run.waiting',
      'run.started',
      'step.completed',
      'run.completed',
    ]);
    const retry = events.find((e) => e.type === 'retry.scheduled')!;
    expect(retry).toMatchObject({ step: 'charge', attempt: 1, error: 'card network down' });
    expect(events.find((e) => e.type === 'run.waiting')).toMatchObject({ waitingFor: 'retry', retryAt: retry.retryAt });
  });

  it('filters by workflow, run and type, in this process', async () => {
    const a = engine.registry.define('a', {}, () => 1);
    const b = engine.registry.define('b', {}, () => 2);
    const byWorkflow = open({ workflow: 'b' });
    const byType = open({ types: ['run.completed'] });
    await Promise.all([byWorkflow.ready, byType.ready]);
    const first = await engine.client.start(a, {});
    const byRun = open({ runId: first.id, from: '0' });
    await engine.worker();
    const second = await engine.client.start(b, {});
    await second.result({ timeoutMs: 5_000 });
    await first.result({ timeoutMs: 5_000 });
    const ofB = await collect(byWorkflow, (all) => all.some((e) => e.type === 'run.completed'));
    expect(new Set(ofB.map((e) => e.workflow))).toEqual(new Set(['b']));
    const completed = await collect(byType, (all) => all.length === 2);
    expect(completed.map((e) => e.type)).toEqual(['run.completed', 'run.completed']);
    const ofRun = await collect(byRun, (all) => all.some((e) => e.type === 'run.completed'));
    expect(ofRun.map((e) => e.type)).toEqual(['run.created', 'run.started', 'run.completed']);
    expect(new Set(ofRun.map((e) => e.runId))).toEqual(new Set([first.id]));
  });

  it('rejects bad options with ConfigurationError', () => {
    expect(() => engine.client.events({ wokflow: 'x' } as never)).toThrow(/Unknown option "wokflow" in client.events\(\) options. Did you mean "workflow"\?/);
    expect(() => engine.client.events({ types: ['run.done' as RunEventType] })).toThrow(ConfigurationError);
    expect(() => engine.client.events({ from: 'yesterday' })).toThrow(
      /option from must be 'now', an event's position such as "1700000000000-0:1", or a stream entry id/,
    );
    expect(() => engine.client.events({ bufferSize: 0 })).toThrow(ConfigurationError);
    expect(() => createClient({ redis: engine.redis, events: { maxLen: 0 } })).toThrow(
      /events.maxLen \(pass events: false to turn the stream off\) must be an integer from 1 to 1000000000, got 0/,
    );
    expect(() => createClient({ redis: engine.redis, events: { max: 5 } as never })).toThrow(ConfigurationError);
  });

  it('closes its connection on break and with await using', async () => {
    const one = engine.registry.define('one', {}, () => 1);
    await engine.worker();
    let opened: RunEventStream;
    {
      await using stream = open();
      opened = stream;
      await stream.ready;
      await (await engine.client.start(one, {})).result({ timeoutMs: 5_000 });
      await eventually(() => stream.buffered >= 3);
    }
    // Closed for good: a Redis ends at 'end', a Cluster disconnected without reconnecting stays at 'close'.
    expect(['end', 'close']).toContain(connectionStatus(opened));
    const stream = open({ from: '0' });
    await collect(stream, () => true);
    expect(['end', 'close']).toContain(connectionStatus(stream));
  });

  it('closing the client closes the readers it opened: a pending next() ends', async () => {
    const client = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry });
    const stream = client.events();
    await stream.ready;
    const iterator = stream[Symbol.asyncIterator]();
    const pending = iterator.next();
    await client.close();
    await expect(pending).resolves.toEqual({ done: true, value: undefined });
    expect(['end', 'close']).toContain(connectionStatus(stream));
  });

  it('a script writes its events as one stream entry: a finish carries its step records and the run end together', async () => {
    const pair = engine.registry.define('pair', {}, async ({ step }) => {
      const a = await step.run('a', () => 1);
      return step.run('b', () => a + 1); // its record goes with the finish
    });
    const stream = open({ from: '0' });
    await engine.worker();
    const handle = await engine.client.start(pair, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe(2);
    const events = await collect(stream, (all) => all.some((e) => e.type === 'run.completed'));
    expect(events.map((e) => e.type)).toEqual(['run.created', 'run.started', 'step.completed', 'step.completed', 'run.completed']);
    const entries = (await engine.redis.xrange(engine.client.keys.events(), '-', '+')) as [string, string[]][];
    // At most one entry per script call: the enqueue, the claim, the checkpoint of "a" (or none,
    // when it rode with the finish) and the finish.
    expect(entries.length).toBeLessThanOrEqual(4);
    const last = events[events.length - 1];
    expect(events.filter((e) => e.id === last.id).map((e) => e.type)).toEqual(expect.arrayContaining(['step.completed', 'run.completed']));
    expect(entries[entries.length - 1][1].filter((field, i) => i % 2 === 0 && field === 'type').length).toBeGreaterThanOrEqual(2);
  });

  it('each event has its own ordered position; a reader resumed from the position of an event in the middle of an entry reads the rest of it, once', async () => {
    const pair = engine.registry.define('pair-positions', {}, async ({ step }) => {
      const a = await step.run('a', () => 1);
      return step.run('b', () => a + 1);
    });
    await engine.worker();
    const first = await engine.client.start(pair, {});
    await first.result({ timeoutMs: 5_000 });
    const second = await engine.client.start(pair, {});
    await second.result({ timeoutMs: 5_000 });
    const all = await collect(open({ from: '0' }), (events) => events.filter((e) => e.type === 'run.completed').length === 2);
    // Positions are unique and ordered like the events.
    expect(new Set(all.map((e) => e.position)).size).toBe(all.length);
    for (const e of all) expect(e.position.startsWith(`${e.id}:`)).toBe(true);
    // An entry with several events: a consumer handled its first one and crashed.
    const shared = all.findIndex((e, i) => i + 1 < all.length && all[i + 1].id === e.id);
    expect(shared).toBeGreaterThanOrEqual(0);
    const handled = all[shared];
    const rest = all.slice(shared + 1);
    const resumed = await collect(open({ from: handled.position }), (events) => events.length === rest.length);
    expect(resumed.map((e) => e.position)).toEqual(rest.map((e) => e.position));
    // Resuming from the entry id instead skips the whole entry (the events after it only).
    const afterEntry = all.slice(all.map((e) => e.id).lastIndexOf(handled.id) + 1);
    const byId = await collect(open({ from: handled.id }), (events) => events.length === afterEntry.length);
    expect(byId.map((e) => e.position)).toEqual(afterEntry.map((e) => e.position));
  });

  it('events: false writes nothing; a small maxLen keeps the stream about that long', async () => {
    const noop = engine.registry.define('noop', {}, () => 1);
    const silent = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, events: false });
    await engine.worker({ client: silent });
    await (await silent.start(noop, {})).result({ timeoutMs: 5_000 });
    expect(await engine.redis.exists(engine.client.keys.events())).toBe(0);

    const small = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, events: { maxLen: 100 } });
    for (let i = 0; i < 50; i++) await small.start(noop, {}); // 100 run.created: below the 5,000 events Redis's ~ may keep
    const writes = Array.from({ length: 2_000 }, () => small.start(noop, {}));
    await Promise.all(writes);
    // MAXLEN ~ trims whole macro nodes (100 entries each by default): the stream stays within a node of 100.
    expect(await engine.redis.xlen(engine.client.keys.events())).toBeLessThanOrEqual(200);
    expect(await engine.redis.xlen(engine.client.keys.events())).toBeGreaterThanOrEqual(100);
    await silent.close();
    await small.close();
  });
});

/** Appends `n` stream entries shaped like the scripts' own, in pipelines of 1,000. */
async function writeEvents(redis: RedisConnection, key: string, n: number, from = 0): Promise<void> {
  for (let i = 0; i < n; i += 1000) {
    const pipeline = redis.pipeline();
    for (let j = i; j < Math.min(n, i + 1000); j++)
      pipeline.xadd(key, '*', 'type', 'run.created', 'runId', `r${from + j}`, 'workflow', 'w', 'at', String(Date.now()));
    await pipeline.exec();
  }
}

async function streamIds(redis: RedisConnection, key: string): Promise<string[]> {
  return ((await redis.xrange(key, '-', '+')) as [string, string[]][]).map(([id]) => id);
}

describe('run event stream: backpressure and outages', () => {
  it('holds at most bufferSize events while the consumer pauses 5 s, then yields every event still in the stream, in order', async () => {
    const engine = new TestEngine();
    const key = engine.client.keys.events();
    const stream = engine.client.events({ bufferSize: 100, from: '0' });
    try {
      await writeEvents(engine.redis, key, 50_000);
      const heapBefore = process.memoryUsage().heapUsed;
      let most = 0;
      const sampler = setInterval(() => (most = Math.max(most, stream.buffered)), 5);
      await new Promise((resolve) => setTimeout(resolve, 5_000)); // the consumer is not reading
      clearInterval(sampler);
      // The reader read until its buffer was full, then stopped reading Redis.
      expect(most).toBe(100);
      // 100 buffered events are a few tens of KB; the 50,000 (~10 MB as objects) stayed in Redis.
      expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(8 * 1024 * 1024);
      const ids: string[] = [];
      for await (const event of stream) {
        ids.push(event.id);
        expect(stream.buffered).toBeLessThanOrEqual(100);
        if (ids.length === 50_000) break;
      }
      expect(ids).toEqual(await streamIds(engine.redis, key));
    } finally {
      await stream.close();
      await engine.close();
    }
  }, 30_000);

  it('never holds more than bufferSize events when entries carry several events, and yields each once, in order', async () => {
    const engine = new TestEngine();
    const key = engine.client.keys.events();
    const stream = engine.client.events({ bufferSize: 10, from: '0' });
    try {
      // 300 entries of 3 events each, shaped like a finish's: step, step, run end.
      const pipeline = engine.redis.pipeline();
      for (let i = 0; i < 300; i++) {
        const at = String(Date.now());
        pipeline.xadd(
          key,
          '*',
          'type',
          'step.completed',
          'runId',
          `r${i}`,
          'workflow',
          'w',
          'at',
          at,
          'step',
          'a',
          'attempt',
          '1',
          'type',
          'step.completed',
          'runId',
          `r${i}`,
          'workflow',
          'w',
          'at',
          at,
          'step',
          'b',
          'attempt',
          '1',
          'type',
          'run.completed',
          'runId',
          `r${i}`,
          'workflow',
          'w',
          'at',
          at,
        );
      }
      await pipeline.exec();
      await new Promise((resolve) => setTimeout(resolve, 200)); // the consumer is not reading yet
      expect(stream.buffered).toBeGreaterThan(0);
      expect(stream.buffered).toBeLessThanOrEqual(10);
      const seen: string[] = [];
      for await (const event of stream) {
        expect(stream.buffered).toBeLessThanOrEqual(10);
        seen.push(`${event.runId}:${event.step ?? event.type}`);
        if (seen.length === 900) break;
      }
      expect(seen).toEqual(Array.from({ length: 300 }, (_, i) => [`r${i}:a`, `r${i}:b`, `r${i}:run.completed`]).flat());
    } finally {
      await stream.close();
      await engine.close();
    }
  });

  it('after a Redis restart, reads on from the last id it read: no duplicates, no gaps, and no "[ioredis]" line on stderr', async () => {
    if (clusterMode) return; // one server of its own, killed and restarted
    // Every connection, the stream's own included, has an error listener: ioredis prints
    // "[ioredis] Unhandled error event" (console.error) only for one without. Under jest it skips
    // that print (its `error instanceof Error` fails across jest's realms), so the test also counts
    // what it would print: an error emitted on a connection with no error listener.
    const silentEmit = jest.spyOn(Redis.prototype as unknown as { silentEmit: (event: string, arg: unknown) => boolean }, 'silentEmit');
    const printed: string[] = [];
    const consoleError = jest.spyOn(console, 'error').mockImplementation((...args: unknown[]) => void printed.push(args.map(String).join(' ')));
    const stderrWrite = jest.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      printed.push(String(chunk));
      return true;
    });
    const server = await OwnRedis.start(['--appendonly', 'yes', '--appendfsync', 'always']);
    const client = createClient({ url: server.url, prefix: 'restart', logger: { warn: () => undefined, error: () => undefined } as never });
    const key = client.keys.events();
    const stream = client.events({ from: '0' });
    try {
      await writeEvents(client.redis, key, 100);
      const ids: string[] = [];
      const reading = (async () => {
        for await (const event of stream) {
          ids.push(event.id);
          if (ids.length === 200) break;
        }
      })();
      await eventually(() => ids.length === 100);
      // The stream's connection schedules a second reconnect only after a first one failed
      // (ECONNREFUSED: an error event) while Redis was down.
      let reconnects = 0;
      (stream as unknown as { connection: RedisConnection }).connection.on('reconnecting', () => reconnects++);
      await server.kill();
      await eventually(() => reconnects >= 2, 10_000);
      await server.restart();
      await eventually(async () => (await client.redis.ping().catch(() => '')) === 'PONG', 10_000);
      await writeEvents(client.redis, key, 100, 100);
      await reading;
      expect(ids).toEqual(await streamIds(client.redis, key));
      expect(new Set(ids).size).toBe(200);
      await stream.close();
      await client.close();
      expect(printed.filter((line) => line.includes('[ioredis]'))).toEqual([]);
      const errors = silentEmit.mock.calls.flatMap(([event, arg], i) =>
        event === 'error' ? [{ error: String(arg), listened: (silentEmit.mock.contexts[i] as Redis).listenerCount('error') > 0 }] : [],
      );
      expect(errors.length).toBeGreaterThan(0); // the connections did see Redis go away
      expect(errors.filter((e) => !e.listened)).toEqual([]);
    } finally {
      silentEmit.mockRestore();
      consoleError.mockRestore();
      stderrWrite.mockRestore();
      await stream.close();
      await client.close();
      await server.stop();
    }
  }, 30_000);
});

function connectionStatus(stream: RunEventStream): string {
  return (stream as unknown as { connection: { status: string } }).connection.status;
}
