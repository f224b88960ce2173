import { aesGcmCodec, ConfigurationError, type WorkflowContext } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

type Order = { customer: string; n: number };

/**
 * `batch: { maxSize, timeout, key? }`: the events that start a workflow are taken in batches, one
 * run per batch with the array of their payloads (batch.lua, fan-out.lua, fire-events-1.lua).
 */
describe('batching', () => {
  let engine: TestEngine;
  afterEach(() => engine.close());

  /** A batched workflow on event "order.placed" that records each batch it is given. */
  function batched(options: { maxSize: number; timeout: string; key?: string }) {
    const batches: Order[][] = [];
    const wf = engine.define('bulk-insert', { event: [{ name: 'order.placed' }], batch: options }, async ({ input }: WorkflowContext<Order[]>) => {
      batches.push(input);
      return input.length;
    });
    return { wf, batches };
  }

  const order = (customer: string, n: number): Order => ({ customer, n });

  it('starts one run per full batch at once, and the rest after the timeout', async () => {
    engine = new TestEngine();
    const { wf, batches } = batched({ maxSize: 3, timeout: '1m' });
    await engine.worker();
    const started: string[][] = [];
    for (let n = 1; n <= 7; n++) started.push(await engine.emit('order.placed', order('c', n)));
    // The 3rd and the 6th event filled a batch: their emits started its run.
    expect(started.map((ids) => ids.length)).toEqual([0, 0, 1, 0, 0, 1, 0]);
    await eventually(() => batches.length === 2);
    expect(batches).toEqual([
      [order('c', 1), order('c', 2), order('c', 3)],
      [order('c', 4), order('c', 5), order('c', 6)],
    ]);
    // The 7th waits for its batch's timeout.
    expect(await engine.client.countRuns({ workflow: wf.name })).toBe(2);
    await engine.clock.advance('1m');
    await eventually(() => batches.length === 3);
    expect(batches[2]).toEqual([order('c', 7)]);
    // A batch's run id is its first event's run id: "<first event id>.<workflow>".
    expect(started[2][0]).toMatch(/\.bulk-insert$/);
    await expect(engine.client.getRun(started[2][0])).resolves.toMatchObject({ status: 'succeeded', output: 3 });
  });

  it('starts a batch that is not full when its timeout passes after its first event', async () => {
    engine = new TestEngine();
    const { wf, batches } = batched({ maxSize: 100, timeout: '10s' });
    await engine.worker();
    await engine.emit('order.placed', order('a', 1));
    await engine.clock.advance('5s');
    await engine.emit('order.placed', order('a', 2));
    expect(await engine.client.countRuns({ workflow: wf.name })).toBe(0);
    // 10 s after the first event, not the last.
    await engine.clock.advance('5s');
    await eventually(() => batches.length === 1);
    expect(batches).toEqual([[order('a', 1), order('a', 2)]]);
  });

  it('batches each value of the key apart', async () => {
    engine = new TestEngine();
    const { batches } = batched({ maxSize: 2, timeout: '1m', key: 'customer' });
    await engine.worker();
    for (const [customer, n] of [
      ['acme', 1],
      ['globex', 1],
      ['acme', 2],
    ] as const) {
      await engine.emit('order.placed', order(customer, n));
    }
    await eventually(() => batches.length === 1);
    expect(batches[0]).toEqual([order('acme', 1), order('acme', 2)]);
    await engine.clock.advance('1m');
    await eventually(() => batches.length === 2);
    expect(batches[1]).toEqual([order('globex', 1)]);
  });

  it('with a payload codec, stores each event sealed and hands the run the payloads in clear', async () => {
    engine = new TestEngine({ codec: aesGcmCodec({ keys: { k1: Buffer.alloc(32, 7) }, current: 'k1' }) });
    const { batches } = batched({ maxSize: 2, timeout: '1m', key: 'customer' });
    await engine.worker();
    expect(await engine.emit('order.placed', order('secret-co', 1))).toEqual([]);
    // The batch is named by a digest of the key's value, and holds the payload sealed.
    const digest = engine.client.context.payloads.matchText(JSON.stringify('secret-co'));
    expect(digest).not.toContain('secret-co');
    const stored = await engine.redis.lrange(engine.client.keys.batch(`bulk-insert|${digest}`), 0, -1);
    expect(stored).toHaveLength(1);
    expect(stored[0]).not.toContain('secret-co');
    const [runId] = await engine.emit('order.placed', order('secret-co', 2));
    await eventually(() => batches.length === 1);
    expect(batches[0]).toEqual([order('secret-co', 1), order('secret-co', 2)]);
    // Read back, the run's input is the payloads in clear too.
    await expect(engine.client.getRun(runId)).resolves.toMatchObject({ input: [order('secret-co', 1), order('secret-co', 2)] });
  });

  it('names a bad batch option', () => {
    engine = new TestEngine();
    expect(() => engine.define('no-events', { batch: { maxSize: 10, timeout: '1s' } }, async () => null)).toThrow(
      /batches the events that start it, and it has none/,
    );
    expect(() => engine.define('too-big', { event: [{ name: 'e' }], batch: { maxSize: 5000, timeout: '1s' } }, async () => null)).toThrow(ConfigurationError);
    expect(() => engine.define('typo', { event: [{ name: 'e' }], batch: { maxSize: 5, timeout: '1s', size: 3 } as never }, async () => null)).toThrow(/size/);
  });
});
