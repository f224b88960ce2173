import { Cluster } from 'ioredis';

import {
  ConfigurationError,
  createClient,
  RateLimitExceededError,
  WorkflowRegistry,
  type RedisConnection,
  type WorkflowClient,
  type WorkflowContext,
} from '../../lib';
import { eventually, TestEngine } from '../support/engine';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Every key matching `pattern`, on every master. */
async function scanKeys(redis: RedisConnection, pattern: string): Promise<string[]> {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [redis];
  const keys: string[] = [];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      keys.push(...batch);
    } while (cursor !== '0');
  }
  return keys.sort();
}

type Tagged = { via: string };

describe('Flow control holds however a run starts', () => {
  let engine: TestEngine;
  /** A second client on the same prefix whose registry defines nothing: it starts runs by name only. */
  let stranger: WorkflowClient;

  beforeEach(() => {
    engine = new TestEngine();
    stranger = createClient({ redis: engine.redis, prefix: engine.prefix, registry: new WorkflowRegistry() });
  });
  afterEach(async () => {
    await stranger.close();
    await engine.close();
  });

  it('a fixed mutex serializes runs started by start, runByName without the definition, an event, a cron tick and a parent', async () => {
    let current = 0;
    let peak = 0;
    const ran: string[] = [];
    const serial = engine.registry.define(
      'serial',
      {
        mutex: 'one-at-a-time',
        maxConcurrency: Infinity,
        event: [{ name: 'go' }],
        cron: [{ expression: '* * * * * *', input: { via: 'cron' } }],
      },
      async ({ input, step }: WorkflowContext<Tagged>) => {
        peak = Math.max(peak, ++current);
        try {
          await step.run('work', () => sleep(150));
          ran.push(input.via);
          return input.via;
        } finally {
          current--;
        }
      },
    );
    // The parent holds no mutex, so waiting for its child cannot deadlock on it.
    const parent = engine.registry.define('parent', { maxConcurrency: Infinity }, async ({ step }) => {
      return step.runWorkflow('child', serial, { via: 'child' });
    });
    await engine.worker({ concurrency: 8 });
    expect(stranger.registry.get('serial')).toBeUndefined();

    const [typed, byName, eventRunIds, parentHandle] = await Promise.all([
      engine.client.start(serial, { via: 'start' }),
      stranger.runByName<string>('serial', { via: 'byName' }),
      engine.client.emitEvent('go', { via: 'event' }),
      engine.client.start(parent, {}),
    ]);
    expect(eventRunIds).toHaveLength(1);

    const succeeded = async () => (await engine.client.listRuns({ workflow: 'serial', status: 'succeeded', limit: 1000 })).map((r) => (r.input as Tagged).via);
    const vias = await eventually(async () => {
      const done = await succeeded();
      return done.length >= 5 && ['start', 'byName', 'event', 'cron', 'child'].every((v) => done.includes(v)) ? done : undefined;
    }, 10_000);
    expect(new Set(vias)).toEqual(new Set(['start', 'byName', 'event', 'cron', 'child']));

    await expect(typed.result({ timeoutMs: 1_000 })).resolves.toBe('start');
    await expect(byName.result({ timeoutMs: 1_000 })).resolves.toBe('byName');
    await expect(engine.client.handle(eventRunIds[0]).result({ timeoutMs: 1_000 })).resolves.toBe('event');
    await expect(parentHandle.result({ timeoutMs: 5_000 })).resolves.toBe('child');
    expect(peak).toBe(1);
    expect(ran).toEqual(expect.arrayContaining(['start', 'byName', 'event', 'cron', 'child']));

    // Every run of every entry point carries the mutex key, and no run overlapped another.
    const runs = await engine.client.listRuns({ workflow: 'serial', limit: 1000 });
    for (const run of runs) expect(await engine.redis.hget(engine.client.keys.run(run.id), 'mutex')).toBe('one-at-a-time');
    const ended = runs.filter((r) => r.status === 'succeeded').sort((a, b) => a.startedAt! - b.startedAt!);
    for (let i = 1; i < ended.length; i++) expect(ended[i].startedAt!).toBeGreaterThanOrEqual(ended[i - 1].finishedAt!);
    expect(await engine.redis.hget(engine.client.keys.run(parentHandle.id), 'mutex')).toBeNull();
  });

  it('a fixed debounce key collapses runByName without the definition and two events into one run with the last input', async () => {
    const inputs: unknown[] = [];
    engine.registry.define(
      'debounced',
      { maxConcurrency: Infinity, debounce: { key: 'k', period: 300 }, event: [{ name: 'd' }] },
      ({ input }: WorkflowContext<{ n: number }>) => {
        inputs.push(input);
        return input;
      },
    );
    await engine.worker();

    const handle = await stranger.runByName<{ n: number }>('debounced', { n: 1 });
    expect(await engine.client.emitEvent('d', { n: 2 })).toEqual([handle.id]);
    expect(await engine.client.emitEvent('d', { n: 3 })).toEqual([handle.id]);
    expect(await handle.getState()).toMatchObject({ status: 'scheduled', input: { n: 3 } });

    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ n: 3 });
    expect(inputs).toEqual([{ n: 3 }]);
    expect((await engine.client.listRuns({ workflow: 'debounced' })).map((r) => r.id)).toEqual([handle.id]);
    expect(await handle.getState()).toMatchObject({ status: 'succeeded', attempt: 1 });
  });

  /** The runs of `workflow` in `status`, with the entry point each was started by. */
  async function runsOf(workflow: string, status?: 'succeeded' | 'failed') {
    return (await engine.client.listRuns({ workflow, ...(status ? { status } : {}), limit: 1000 })).map((r) => ({ ...r, via: (r.input as Tagged).via }));
  }

  /** Entry points that start runs without the definition: by name from another process, by an event, by cron. */
  const ENTRY_POINTS = ['byName', 'event', 'cron'];

  it('a fixed throttle spaces runs started by runByName without the definition, by an event and by cron: one start per period across all of them', async () => {
    engine.registry.define(
      'throttled',
      { maxConcurrency: Infinity, throttle: { limit: 1, period: 400 }, event: [{ name: 't' }], cron: [{ expression: '* * * * * *', input: { via: 'cron' } }] },
      ({ input }: WorkflowContext<Tagged>) => input.via,
    );
    await engine.worker({ concurrency: 8 });
    expect(stranger.registry.get('throttled')).toBeUndefined();

    const started = await Promise.all([
      stranger.runByName('throttled', { via: 'byName' }),
      stranger.runByName('throttled', { via: 'byName' }),
      engine.client.emitEvent('t', { via: 'event' }),
      engine.client.emitEvent('t', { via: 'event' }),
    ]);
    expect(started.flat()).toHaveLength(4);
    const done = (await eventually(async () => {
      const runs = await runsOf('throttled', 'succeeded');
      const count = (via: string) => runs.filter((r) => r.via === via).length;
      return count('byName') === 2 && count('event') === 2 && count('cron') >= 1 ? runs : undefined;
    }, 10_000))!;

    // Every run, however it started, carries the definition's window.
    for (const run of await runsOf('throttled')) expect(await engine.redis.hget(engine.client.keys.run(run.id), 'throttle')).toBe('1|400|throttled|');
    // No two starts within one period, whoever started them.
    const starts = done.map((r) => r.startedAt!).sort((a, b) => a - b);
    for (let i = 1; i < starts.length; i++) expect(starts[i] - starts[i - 1]).toBeGreaterThanOrEqual(400);
    // Four runs were due at once: at least three waited for the window, and none was charged an attempt for it.
    expect(done.filter((r) => r.via !== 'cron' && r.availableAt > r.createdAt).length).toBeGreaterThanOrEqual(3);
    for (const run of done) expect(run.attempt).toBe(1);
  });

  it('a fixed rateLimit counts runs started by runByName without the definition, by an event and by cron in one window: one succeeds, the rest fail with RateLimitExceededError before their handler', async () => {
    const calls: string[] = [];
    engine.registry.define(
      'limited',
      {
        maxConcurrency: Infinity,
        rateLimit: { limit: 1, period: '1m' },
        event: [{ name: 'l' }],
        cron: [{ expression: '* * * * * *', input: { via: 'cron' } }],
      },
      ({ input }: WorkflowContext<Tagged>) => {
        calls.push(input.via);
        return input.via;
      },
    );
    await engine.worker({ concurrency: 8 });

    await Promise.all([stranger.runByName('limited', { via: 'byName' }), engine.client.emitEvent('l', { via: 'event' })]);
    const ended = (await eventually(async () => {
      const runs = [...(await runsOf('limited', 'succeeded')), ...(await runsOf('limited', 'failed'))];
      return ENTRY_POINTS.every((via) => runs.some((r) => r.via === via)) ? runs : undefined;
    }, 10_000))!;

    const succeeded = ended.filter((r) => r.status === 'succeeded');
    expect(succeeded).toHaveLength(1);
    expect(calls).toEqual([succeeded[0].via]);
    for (const run of ended.filter((r) => r.status === 'failed')) {
      const state = await engine.client.getRun(run.id);
      expect(state).toMatchObject({ status: 'failed', attempt: 0, error: { name: 'RateLimitExceededError' } });
      expect(state?.startedAt).toBeUndefined();
      await expect(engine.client.handle(run.id).result({ timeoutMs: 1_000 })).rejects.toBeInstanceOf(RateLimitExceededError);
    }
    for (const run of ended) expect(await engine.redis.hget(engine.client.keys.run(run.id), 'rateLimit')).toBe('1|60000|limited|');
  });

  it('maxConcurrency 1 holds for runs started by runByName without the definition, by an event and by cron: a peak of 1', async () => {
    let current = 0;
    let peak = 0;
    engine.registry.define(
      'capped',
      { maxConcurrency: 1, event: [{ name: 'c' }], cron: [{ expression: '* * * * * *', input: { via: 'cron' } }] },
      async ({ input, step }: WorkflowContext<Tagged>) => {
        peak = Math.max(peak, ++current);
        try {
          await step.run('work', () => sleep(150));
          return input.via;
        } finally {
          current--;
        }
      },
    );
    await engine.worker({ concurrency: 8 });

    await Promise.all([
      stranger.runByName('capped', { via: 'byName' }),
      stranger.runByName('capped', { via: 'byName' }),
      engine.client.emitEvent('c', { via: 'event' }),
      engine.client.emitEvent('c', { via: 'event' }),
    ]);
    const done = (await eventually(async () => {
      const runs = await runsOf('capped', 'succeeded');
      const count = (via: string) => runs.filter((r) => r.via === via).length;
      return count('byName') === 2 && count('event') === 2 && count('cron') >= 1 ? runs : undefined;
    }, 10_000))!;

    expect(peak).toBe(1);
    const ordered = done.sort((a, b) => a.startedAt! - b.startedAt!);
    for (let i = 1; i < ordered.length; i++) expect(ordered[i].startedAt!).toBeGreaterThanOrEqual(ordered[i - 1].finishedAt!);
    for (const run of done) expect(run.attempt).toBe(1);
  });

  it('a mutex computed by a function: runByName without the definition is refused with nothing written, and an event trigger is refused at define time', async () => {
    const perTenant = engine.registry.define(
      'per-tenant',
      { maxConcurrency: Infinity, mutex: (input: { tenant: string }) => `tenant:${input.tenant}` },
      ({ input }) => input.tenant,
    );
    await engine.worker();

    const refused = stranger.runByName('per-tenant', { tenant: 't1' });
    await expect(refused).rejects.toBeInstanceOf(ConfigurationError);
    await expect(refused).rejects.toThrow(/"per-tenant"/);
    expect(await scanKeys(engine.redis, `${engine.client.keys.base}run:*`)).toEqual([]);
    expect(await scanKeys(engine.redis, `${engine.client.keys.base}status:*`)).toEqual([]);
    expect(await engine.client.listRuns({ workflow: 'per-tenant' })).toEqual([]);

    // The client that has the definition computes the key and starts it.
    const handle = await engine.client.start(perTenant, { tenant: 't1' });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('t1');
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'mutex')).toBe('tenant:t1');

    const registry = new WorkflowRegistry();
    const defineTriggered = (extra: object) => () =>
      registry.define('triggered-per-tenant', { mutex: (input: { tenant: string }) => input.tenant, ...extra }, () => null);
    expect(defineTriggered({ event: [{ name: 'go' }] })).toThrow(ConfigurationError);
    expect(defineTriggered({ event: [{ name: 'go' }] })).toThrow(/"triggered-per-tenant" has event triggers/);
    expect(defineTriggered({ cron: [{ expression: '* * * * * *' }] })).toThrow(/"triggered-per-tenant" has cron triggers/);
    expect(registry.list()).toEqual([]);
  });
});
