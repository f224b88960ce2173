import { Redis } from 'ioredis';

import { CanceledError, ConfigurationError, type WorkflowContext } from '../../lib';
import { matchKey } from '../../lib/core/definition/event-match';
import { eventually, TestEngine } from '../support/engine';

/** The Redis servers of the test setup: the standalone one, or every node of the cluster. */
function testServers(): Redis[] {
  const nodes = process.env.REDFLOW_TEST_CLUSTER_NODES;
  if (nodes) return nodes.split(',').map((n) => new Redis({ host: n.split(':')[0], port: Number(n.split(':')[1]) }));
  return [new Redis(process.env.REDFLOW_TEST_REDIS_URL!)];
}

/**
 * Emits event `tick` with `payload` and returns the commands its script ran inside Redis (name in
 * lower case, then the arguments), as MONITOR shows them: those from Lua (source "lua") on the
 * engine's prefix, between two marker commands sent on the engine's connection before and after the
 * emit. Fails unless the emit was the only script called on the prefix in between (EVALSHA, or
 * EVAL the first time).
 */
async function emitCommands(engine: TestEngine, payload: object): Promise<string[][]> {
  const base = engine.client.keys.base;
  const mark = `${base}monitor-mark:${Math.random().toString(36).slice(2)}`;
  const seen: { args: string[]; source: string }[] = [];
  const servers = testServers();
  const monitors = await Promise.all(servers.map((server) => server.monitor()));
  try {
    for (const monitor of monitors) monitor.on('monitor', (_time: string, args: string[], source: string) => seen.push({ args, source }));
    const isMark = (e: { args: string[] }, which: string) => e.args[0].toLowerCase() === 'exists' && e.args[1] === `${mark}:${which}`;
    // MONITOR starts streaming once the server has set it up: wait until the first marker shows.
    await eventually(async () => {
      await engine.redis.exists(`${mark}:start`);
      return seen.some((e) => isMark(e, 'start'));
    });
    const from = seen.length;
    await engine.redis.exists(`${mark}:from`);
    await engine.client.emitEvent('tick', payload);
    await engine.redis.exists(`${mark}:end`);
    await eventually(() => seen.some((e) => isMark(e, 'end')));
    const window = seen.slice(from);
    const first = window.findIndex((e) => isMark(e, 'from'));
    const last = window.findIndex((e) => isMark(e, 'end'));
    const inside = window.slice(first + 1, last).filter((e) => e.args.some((arg) => arg.includes(base)));
    const scriptCalls = inside.filter((e) => e.source !== 'lua');
    expect(scriptCalls).toHaveLength(1);
    expect(['eval', 'evalsha', 'fcall']).toContain(scriptCalls[0].args[0].toLowerCase());
    return inside.filter((e) => e.source === 'lua').map((e) => [e.args[0].toLowerCase(), ...e.args.slice(1)]);
  } finally {
    for (const connection of [...monitors, ...servers]) connection.disconnect();
  }
}

/**
 * `step.waitForEvent` (an emitted event whose payload fields equal `match` wakes the run) and
 * `cancelOn` (a matching event cancels the run). Waits are found by one lookup per match shape,
 * never by scanning waiting runs.
 */
describe('waitForEvent and cancelOn', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;

  it('resumes the run whose match the payload fields equal, with the payload; other events and earlier ones do not count', async () => {
    const shipping = engine.registry.define('shipping', { maxConcurrency: Infinity }, async ({ step, input }: WorkflowContext<{ orderId: string }>) => {
      const shipped = await step.waitForEvent<{ orderId: string; carrier: string }>('await-shipment', 'order.shipped', { match: { orderId: input.orderId } });
      return shipped?.carrier;
    });
    await engine.worker({ concurrency: 1 });
    // Emitted before any wait started: not kept for later waits.
    await engine.client.emitEvent('order.shipped', { orderId: 'o-1', carrier: 'too early' });
    const one = await engine.client.start(shipping, { orderId: 'o-1' });
    const two = await engine.client.start(shipping, { orderId: 'o-2' });
    await eventually(async () => (await statusOf(one.id)) === 'scheduled' && (await statusOf(two.id)) === 'scheduled');
    expect((await engine.client.getRunSteps(one.id))[0]).toMatchObject({ status: 'waiting', event: 'order.shipped', match: { orderId: 'o-1' } });

    await engine.client.emitEvent('order.shipped', { orderId: 'o-3', carrier: 'nobody waits' });
    await engine.client.emitEvent('order.packed', { orderId: 'o-1', carrier: 'other event' });
    await engine.client.emitEvent('order.shipped', { orderId: 'o-2', carrier: 'dhl', extra: { nested: true } });
    await expect(two.result({ timeoutMs: 5_000 })).resolves.toBe('dhl');
    expect(await statusOf(one.id)).toBe('scheduled');
    await engine.client.emitEvent('order.shipped', { orderId: 'o-1', carrier: 'ups' });
    await expect(one.result({ timeoutMs: 5_000 })).resolves.toBe('ups');
    expect((await engine.client.getRunSteps(one.id))[0]).toMatchObject({ status: 'succeeded', output: { orderId: 'o-1', carrier: 'ups' } });
    // The waits were removed from the lookup when they ended.
    expect(await engine.redis.hlen(engine.client.keys.eventShapes('order.shipped'))).toBe(0);
  });

  it('matches numbers exactly (no rounding), several fields at once, and a wait without match takes any event of its name', async () => {
    const wf = engine.registry.define('numbers', { maxConcurrency: Infinity }, async ({ step, input }: WorkflowContext<{ id: number; region?: string }>) =>
      step.waitForEvent('wait', 'paid', { match: input.region === undefined ? { id: input.id } : { region: input.region, id: input.id } }),
    );
    const any = engine.registry.define('any', {}, async ({ step }) => step.waitForEvent<{ id: number }>('wait', 'paid'));
    await engine.worker({ concurrency: 4 });
    const big = await engine.client.start(wf, { id: 1234567890123456 });
    const next = await engine.client.start(wf, { id: 1234567890123457 });
    const both = await engine.client.start(wf, { id: 7, region: 'eu' });
    const anyRun = await engine.client.start(any, {});
    await eventually(async () => (await Promise.all([big, next, both, anyRun].map((h) => statusOf(h.id)))).every((s) => s === 'scheduled'));
    await engine.client.emitEvent('paid', { id: 1234567890123457 });
    await expect(next.result({ timeoutMs: 5_000 })).resolves.toEqual({ id: 1234567890123457 });
    await expect(anyRun.result({ timeoutMs: 5_000 })).resolves.toEqual({ id: 1234567890123457 });
    expect(await statusOf(big.id)).toBe('scheduled');
    await engine.client.emitEvent('paid', { id: 7, region: 'us' });
    expect(await statusOf(both.id)).toBe('scheduled');
    await engine.client.emitEvent('paid', { id: 7, region: 'eu' });
    await expect(both.result({ timeoutMs: 5_000 })).resolves.toEqual({ id: 7, region: 'eu' });
    await engine.client.cancelRun(big.id);
  });

  it('returns null at the timeout, and the wait is removed from the lookup', async () => {
    const wf = engine.registry.define('timeout', {}, async ({ step }) => step.waitForEvent('wait', 'never', { match: { k: 'v' }, timeout: 100 }));
    await engine.worker();
    const handle = await engine.client.start(wf, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBeNull();
    expect(await engine.redis.hlen(engine.client.keys.eventShapes('never'))).toBe(0);
    expect(await engine.redis.exists(engine.client.keys.eventWaitsOf(handle.id))).toBe(0);
  });

  it('a bad match is a ConfigurationError naming the step', async () => {
    const wf = engine.registry.define('bad-match', {}, async ({ step }) =>
      step.waitForEvent('wait', 'e', { match: { nested: { a: 1 } as unknown as string } }),
    );
    await engine.worker();
    const handle = await engine.client.start(wf, {});
    const error = await handle.result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/the match of step "wait" field "nested" must be a string, a finite number or a boolean/);
  });

  it('10,000 waiting runs: one emit wakes exactly the matching one, in under 50 ms; its script reads one match shape and one wait set, the same commands as with 100 waits', async () => {
    const wf = engine.registry.define('many', { maxConcurrency: Infinity }, async ({ step, input }: WorkflowContext<{ n: number }>) =>
      step.waitForEvent('wait', 'tick', { match: { n: input.n } }),
    );
    // Runs n = from..to-1, each waiting for tick { n } (workers run their handlers, which record the waits).
    const ids = new Map<number, string>();
    const startRuns = async (from: number, to: number) => {
      for (let i = from; i < to; i += 500) {
        const batch = await Promise.all(Array.from({ length: Math.min(500, to - i) }, (_, j) => engine.client.start(wf, { n: i + j })));
        batch.forEach((h, j) => ids.set(i + j, h.id));
      }
    };
    const waitingRuns = () => engine.client.countRuns({ workflow: 'many', status: 'scheduled' });

    // What the emit script reads and writes, with 100 waits and with 9,999 (the workers stopped, so
    // that it is the only script running on the prefix).
    await startRuns(0, 100);
    let worker = await engine.worker({ concurrency: 50 });
    await eventually(async () => (await waitingRuns()) === 100, 20_000);
    await worker.stop({ timeoutMs: 5_000 });
    const with100 = await emitCommands(engine, { n: 42 });

    worker = await engine.worker({ concurrency: 50 });
    await startRuns(100, 10_001);
    await expect(engine.client.handle(ids.get(42)!).result({ timeoutMs: 5_000 })).resolves.toEqual({ n: 42 });
    await eventually(async () => (await waitingRuns()) === 10_000, 60_000);
    // Timed, with 10,000 runs waiting and a worker serving them.
    const started = performance.now();
    await engine.client.emitEvent('tick', { n: 7_777 });
    const emitMs = performance.now() - started;
    expect(emitMs).toBeLessThan(50);
    await expect(engine.client.handle(ids.get(7_777)!).result({ timeoutMs: 5_000 })).resolves.toEqual({ n: 7_777 });
    expect(await waitingRuns()).toBe(9_999);

    await worker.stop({ timeoutMs: 5_000 });
    // 9,999 waits of one shape: one entry in the shape hash, and one run in the set of n = 5555.
    const shapes = engine.client.keys.eventShapes('tick');
    const matched = engine.client.keys.eventWait('tick', matchKey({ n: 5_555 }, 'match').hash);
    expect(await engine.redis.hgetall(shapes)).toEqual({ n: '9999' });
    expect(await engine.redis.smembers(matched)).toEqual([`${ids.get(5_555)}\ns:wait`]);
    const with10k = await emitCommands(engine, { n: 5_555 });
    // The lookup: one HKEYS of the shapes and one SMEMBERS of the matched set, whose one member is the
    // run woken; no other run's keys are touched.
    const reads = (c: string[]) =>
      [
        'hkeys',
        'hvals',
        'hgetall',
        'hscan',
        'smembers',
        'sscan',
        'sunion',
        'sinter',
        'zrange',
        'zrangebyscore',
        'zrevrange',
        'zscan',
        'lrange',
        'sort',
        'keys',
        'scan',
      ].includes(c[0]);
    const subscribers = engine.client.keys.eventSubscribers('tick');
    expect(with10k.filter(reads)).toEqual([
      ['hkeys', shapes],
      ['smembers', matched],
      ['smembers', subscribers],
    ]);
    const runKeys = new Set(with10k.flatMap((c) => c.slice(1)).filter((arg) => arg.startsWith(engine.client.keys.run(''))));
    expect([...runKeys]).toEqual([engine.client.keys.run(ids.get(5_555)!)]);
    // The same commands as with 100 waits: the work does not grow with the waiting runs.
    expect(with10k.map((c) => c[0])).toEqual(with100.map((c) => c[0]));

    await engine.worker({ concurrency: 50 });
    await expect(engine.client.handle(ids.get(5_555)!).result({ timeoutMs: 5_000 })).resolves.toEqual({ n: 5_555 });
    expect(await waitingRuns()).toBe(9_998);
    expect(await engine.client.countRuns({ workflow: 'many', status: 'succeeded' })).toBe(3);
  }, 180_000);

  it('cancelOn cancels a waiting run on a matching event and leaves it on a non-matching one', async () => {
    const order = engine.registry.define(
      'order',
      { maxConcurrency: Infinity, cancelOn: [{ event: 'order.deleted', match: 'orderId' }] },
      async ({ step, input }: WorkflowContext<{ orderId: string }>) => {
        await step.sleep('grace', '1h');
        return input.orderId;
      },
    );
    await engine.worker();
    const kept = await engine.client.start(order, { orderId: 'o-1' });
    const doomed = await engine.client.start(order, { orderId: 'o-2' });
    await eventually(async () => (await statusOf(kept.id)) === 'scheduled' && (await statusOf(doomed.id)) === 'scheduled');
    await engine.client.emitEvent('order.deleted', { orderId: 'o-3' });
    await engine.client.emitEvent('order.deleted', { orderId: 'o-2' });
    const error = await doomed.result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(CanceledError);
    expect((await engine.client.getRun(doomed.id))!).toMatchObject({ status: 'canceled', cancelReason: 'event order.deleted' });
    expect(await statusOf(kept.id)).toBe('scheduled');
    // Resumed, the run registers its cancelOn again when it starts: the next matching event cancels it again.
    expect(await engine.client.resume(doomed.id)).toBe(true);
    await eventually(
      async () => (await statusOf(doomed.id)) === 'scheduled' && (await engine.redis.hget(engine.client.keys.run(doomed.id), 'cancelOn')) === '1',
    );
    await engine.client.emitEvent('order.deleted', { orderId: 'o-2' });
    await eventually(async () => (await statusOf(doomed.id)) === 'canceled');
    await engine.client.cancelRun(kept.id);
    // Ended runs leave nothing in the lookup.
    expect(await engine.redis.hlen(engine.client.keys.eventShapes('order.deleted'))).toBe(0);
  });

  it('a cancelOn run that completes drops its registrations, and a later matching event finds nothing to cancel', async () => {
    const job = engine.registry.define(
      'quick-job',
      { maxConcurrency: Infinity, cancelOn: [{ event: 'job.drop', match: 'jobId' }] },
      async ({ step, input }: WorkflowContext<{ jobId: string }>) => step.run('work', () => input.jobId),
    );
    const plain = engine.registry.define('plain-job', { maxConcurrency: Infinity }, async ({ step }) => step.run('work', () => 'plain'));
    await engine.worker();
    const handle = await engine.client.start(job, { jobId: 'j-1' });
    const other = await engine.client.start(plain, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('j-1');
    await expect(other.result({ timeoutMs: 5_000 })).resolves.toBe('plain');
    // The run registered its cancelOn (flagged `evw` on its hash), so finishing dropped it; the
    // plain run never registered anything and carries no flag.
    expect(await engine.redis.hget(engine.client.keys.run(handle.id), 'evw')).toBe('1');
    expect(await engine.redis.hget(engine.client.keys.run(other.id), 'evw')).toBeNull();
    expect(await engine.redis.exists(engine.client.keys.eventWaitsOf(handle.id))).toBe(0);
    expect(await engine.redis.hlen(engine.client.keys.eventShapes('job.drop'))).toBe(0);
    await engine.client.emitEvent('job.drop', { jobId: 'j-1' });
    expect(await statusOf(handle.id)).toBe('succeeded');
  });

  it('cancelOn cancels a running run: its signal aborts and its later steps never run', async () => {
    let after = 0;
    const job = engine.registry.define(
      'job',
      { cancelOn: [{ event: 'job.stop', match: (input: { job: string }) => ({ job: input.job }) }] },
      async ({ step, signal }: WorkflowContext<{ job: string }>) => {
        await step.run('work', () => new Promise((resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason))));
        await step.run('after', () => after++);
      },
    );
    await engine.worker();
    const handle = await engine.client.start(job, { job: 'j-1' });
    await eventually(async () => (await statusOf(handle.id)) === 'running' && (await engine.redis.hget(engine.client.keys.run(handle.id), 'cancelOn')) === '1');
    await engine.client.emitEvent('job.stop', { job: 'j-1' });
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow(CanceledError);
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(after).toBe(0);
  });

  it('a bad cancelOn is a ConfigurationError when the workflow is defined', () => {
    expect(() => engine.registry.define('bad-cancel', { cancelOn: [{ event: 'bad event!' }] }, () => 1)).toThrow(ConfigurationError);
    expect(() => engine.registry.define('bad-cancel2', { cancelOn: [{ event: 'e', match: 5 as unknown as string }] }, () => 1)).toThrow(
      /cancelOn\[0\]\.match of workflow "bad-cancel2" must be a field name/,
    );
    expect(() => engine.registry.define('bad-cancel3', { cancelOn: [{ event: 'e', mtch: 'x' } as never] }, () => 1)).toThrow(ConfigurationError);
  });
});
