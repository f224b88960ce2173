import { Cluster } from 'ioredis';
import { ConfigurationError, createClient, WorkflowRegistry, type RedisConnection, type WorkflowClient, type WorkflowContext } from '../../lib';
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
