import { createClient, IdempotencyConflictError, UnknownWorkflowError, type WorkflowContext } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

/**
 * `runMany` / `runManyByName`: every item checked, then stored by `enqueue-many-1.lua` in a few
 * script calls (500 items each), each all or nothing, with per-item idempotency.
 */
describe('runMany', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  /** The commands `fn` sends on the engine's connection: its round trips to Redis. */
  async function commandsSentBy(fn: () => Promise<unknown>): Promise<string[]> {
    const connection = engine.redis as unknown as { sendCommand(command: { name: string }): unknown };
    const original = connection.sendCommand.bind(connection);
    const sent: string[] = [];
    connection.sendCommand = (command) => {
      sent.push(command.name);
      return original(command);
    };
    try {
      await fn();
    } finally {
      connection.sendCommand = original;
    }
    return sent;
  }

  it('stores 1,000 runs in two script calls, and they all run', async () => {
    let ran = 0;
    const wf = engine.define('bulk', {}, async ({ input }: WorkflowContext<{ i: number }>) => {
      ran++;
      return input.i;
    });
    await engine.client.runManyByName('bulk', [{ input: { i: -1 } }]); // the scripts are loaded and Redis checked once per client
    const items = Array.from({ length: 1000 }, (_, i) => ({ input: { i } }));
    let handles: Awaited<ReturnType<typeof engine.client.runManyByName>> = [];
    const sent = await commandsSentBy(async () => (handles = await engine.client.runManyByName(wf.name, items)));
    // Two script calls: FCALL when the scripts are a Redis Function library, EVALSHA otherwise.
    expect(sent).toHaveLength(2);
    expect(sent.every((name) => name === 'fcall' || name === 'evalsha')).toBe(true);
    expect(new Set(handles.map((h) => h.id)).size).toBe(1000);
    await engine.worker({ concurrency: 20 });
    await expect(handles[999].result({ timeout: '20s' })).resolves.toBe(999);
    await eventually(async () => (await engine.client.countRuns({ workflow: 'bulk', status: 'succeeded' })) === 1001, 20_000);
    expect(ran).toBe(1001);
  });

  it('is all or nothing per call: an idempotency conflict stores none of the items, and names the key', async () => {
    engine.define('bulk', {}, async () => 'ok');
    const first = await engine.client.runByName('bulk', { n: 1 }, { idempotencyKey: 'order-1' });
    const error = await engine.client
      .runManyByName('bulk', [{ input: { n: 0 } }, { input: { n: 2 }, options: { idempotencyKey: 'order-1' } }, { input: { n: 3 } }])
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(IdempotencyConflictError);
    expect(error).toMatchObject({ idempotencyKey: 'order-1', existingRunId: first.id });
    expect(await engine.client.countRuns({ workflow: 'bulk' })).toBe(1);
  });

  it('keeps per-item idempotency: an item repeated in one call, or in a later call, is the same run', async () => {
    engine.define('bulk', {}, async () => 'ok');
    const items = [
      { input: { n: 1 }, options: { idempotencyKey: 'a' } },
      { input: { n: 1 }, options: { idempotencyKey: 'a' } },
      { input: { n: 2 }, options: { idempotencyKey: 'b' } },
    ];
    const once = await engine.client.runManyByName('bulk', items);
    expect(once[0].id).toBe(once[1].id);
    expect(once[2].id).not.toBe(once[0].id);
    const again = await engine.client.runManyByName('bulk', items);
    expect(again.map((h) => h.id)).toEqual(once.map((h) => h.id));
    expect(await engine.client.countRuns({ workflow: 'bulk' })).toBe(2);
    // Two items of one call with one key and different inputs: a conflict, nothing stored.
    await expect(
      engine.client.runManyByName('bulk', [
        { input: { n: 3 }, options: { idempotencyKey: 'c' } },
        { input: { n: 4 }, options: { idempotencyKey: 'c' } },
      ]),
    ).rejects.toThrow(IdempotencyConflictError);
    expect(await engine.client.countRuns({ workflow: 'bulk' })).toBe(2);
  });

  it('refuses a workflow that is neither defined here nor registered, storing nothing', async () => {
    const producer = createClient({ redis: engine.redis, prefix: engine.prefix });
    await expect(producer.runManyByName('nowhere', [{ input: 1 }, { input: 2 }])).rejects.toThrow(UnknownWorkflowError);
    expect(await engine.client.countRuns({})).toBe(0);
    await producer.close();
  });
});
