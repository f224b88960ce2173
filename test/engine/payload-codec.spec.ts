import { aesGcmCodec, createAdmin, createClient, createSchedules, PayloadCodecError, PayloadKeyError, type RedisConnection } from '../../lib/core';
import { eventually, TestEngine } from '../support/engine';

/**
 * The payload codec: every payload the engine stores (inputs, outputs, step records, signal and
 * event payloads, progress, setEvent values, match values, schedule inputs) goes through it, so
 * that none is readable in Redis; ids, names and statuses stay readable; old keys keep decoding,
 * `rotatePayloads` re-encrypts with the current key while runs go on, and a missing or wrong key
 * is a named error naming the key.
 */
const K1 = Buffer.alloc(32, 1).toString('base64');
const K2 = Buffer.alloc(32, 2).toString('hex');
const codecV1 = () => aesGcmCodec({ keys: { k1: K1 }, current: 'k1' });
const codecV2 = () => aesGcmCodec({ keys: { k1: K1, k2: K2 }, current: 'k2' });

/** Every string stored under the prefix: keys, hash fields and values, list, set and zset members, stream entries. */
async function everything(redis: RedisConnection, base: string): Promise<string[]> {
  const texts: string[] = [];
  const nodes = 'nodes' in redis && typeof redis.nodes === 'function' ? (redis as unknown as { nodes(r: string): RedisConnection[] }).nodes('master') : [redis];
  for (const node of nodes) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', `${base}*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys) {
        texts.push(key);
        const type = await node.type(key);
        if (type === 'string') texts.push((await node.get(key)) ?? '');
        else if (type === 'hash') texts.push(...Object.entries(await node.hgetall(key)).flat());
        else if (type === 'list') texts.push(...(await node.lrange(key, 0, -1)));
        else if (type === 'set') texts.push(...(await node.smembers(key)));
        else if (type === 'zset') texts.push(...(await node.zrange(key, '0', '-1')));
        else if (type === 'stream') for (const [, fields] of await node.xrange(key, '-', '+')) texts.push(...fields);
      }
    } while (cursor !== '0');
  }
  return texts;
}

/** The key ids named by the envelopes stored under the prefix. */
async function keyIdsInUse(redis: RedisConnection, base: string): Promise<Map<string, number>> {
  const ids = new Map<string, number>();
  for (const text of await everything(redis, base)) {
    for (const [, b64] of text.matchAll(/"\\u0001rfc:([A-Za-z0-9_-]*)"/g)) {
      const bytes = Buffer.from(b64, 'base64url');
      const id = Buffer.from(bytes.subarray(2, 2 + bytes[1])).toString('latin1');
      ids.set(id, (ids.get(id) ?? 0) + 1);
    }
  }
  return ids;
}

describe('payload codec', () => {
  let engine: TestEngine;
  afterEach(() => engine.close());

  it('round-trips every kind of payload, and leaves none of them readable in Redis', async () => {
    engine = new TestEngine({ codec: codecV1() });
    const { client } = engine;
    const child = engine.define('codec-child', {}, async ({ input }) => ({ echoed: `${(input as { s: string }).s}-child-out-SECRET` }));
    engine.define('codec-listener', { event: [{ name: 'codec.note' }] }, async ({ input, step }) => step.run('heard', () => input));
    const wf = engine.define('codec-parent', {}, async ({ input, step, setEvent }) => {
      const { card } = input as { card: string };
      const charged = await step.run('charge', () => ({ receipt: `${card}-receipt-SECRET` }));
      await step.setProgress({ phase: 'SECRET-progress' });
      await setEvent('status', { note: 'SECRET-value' });
      const approval = await step.waitForSignal<{ by: string }>('approval', 'approve');
      const arrived = await step.waitForEvent<{ orderId: string; memo: string }>('arrived', 'codec.arrived', { match: { orderId: 'SECRET-order-42' } });
      const fromChild = await step.runWorkflow('child', child, { s: 'SECRET-child-in' });
      const raced = await step.waitForAny('race', { sig: step.signal('go') });
      const notified = await step.emitEvent('notify', 'codec.note', { memo: 'SECRET-emitted' });
      return { charged, approval, arrived, fromChild, raced: raced.value, notified: notified.length, tail: 'SECRET-output' };
    });
    engine.define('codec-cron', { cron: [{ id: 'codec-cron', expression: '0 4 * * *', input: { s: 'SECRET-cron' } }] }, async ({ input }) => input);
    await engine.worker();
    await client.schedule('nightly-codec', { workflow: 'codec-child', cron: '0 3 * * *', input: { s: 'SECRET-schedule' } });

    const handle = await client.start(wf, { card: 'SECRET-card-4242' });
    const steps = async () => (await client.getRunSteps(handle.id)).map((s) => s.name);
    await eventually(async () => (await client.getRunSteps(handle.id)).find((s) => s.name === 'approval')?.status === 'waiting');
    await client.signal(handle.id, 'approve', { by: 'SECRET-approver' });
    await eventually(async () => (await steps()).includes('arrived'));
    // A wait's match values read back from its record; the emitter's fields are looked up by digest.
    await eventually(async () => (await client.getRunSteps(handle.id)).find((s) => s.name === 'arrived')?.status === 'waiting');
    expect((await client.getRunSteps(handle.id)).find((s) => s.name === 'arrived')?.match).toEqual({ orderId: 'SECRET-order-42' });
    // It wakes the waiting run (and starts no run: no workflow is triggered by it).
    expect(await client.emitEvent('codec.arrived', { orderId: 'SECRET-order-42', memo: 'SECRET-memo' })).toEqual([]);
    await eventually(async () => (await steps()).includes('race'));
    await eventually(async () => client.signal(handle.id, 'go', { SECRET: 'raced' }));

    const output = await handle.result({ timeout: '10s' });
    expect(output).toEqual({
      charged: { receipt: 'SECRET-card-4242-receipt-SECRET' },
      approval: { by: 'SECRET-approver' },
      arrived: { orderId: 'SECRET-order-42', memo: 'SECRET-memo' },
      fromChild: { echoed: 'SECRET-child-in-child-out-SECRET' },
      raced: { SECRET: 'raced' },
      notified: 1,
      tail: 'SECRET-output',
    });
    const run = await client.getRun(handle.id);
    expect(run).toMatchObject({ input: { card: 'SECRET-card-4242' }, output, progress: { phase: 'SECRET-progress' } });
    expect(await client.getRunEvent(handle.id, 'status')).toEqual({ note: 'SECRET-value' });
    const stepOutputs = Object.fromEntries((await client.getRunSteps(handle.id)).map((s) => [s.name, s.output]));
    expect(stepOutputs).toMatchObject({
      charge: { receipt: 'SECRET-card-4242-receipt-SECRET' },
      approval: { by: 'SECRET-approver' },
      race: { key: 'sig', value: { SECRET: 'raced' } },
    });
    const [heard] = await client.listRuns({ workflow: 'codec-listener' });
    await expect(client.waitForRun(heard.id, { timeout: '5s' })).resolves.toEqual({ memo: 'SECRET-emitted' });
    expect((await client.listSchedules())[0].input).toEqual({ s: 'SECRET-schedule' });
    // A decorator trigger's static input stays in code (not in Redis): its ticks still get it.
    const fired = await createSchedules(client).trigger('codec-cron');
    await expect(client.waitForRun(fired.runId!, { timeout: '5s' })).resolves.toEqual({ s: 'SECRET-cron' });
    const nightly = await createSchedules(client).trigger('nightly-codec');
    await expect(client.waitForRun(nightly.runId!, { timeout: '5s' })).resolves.toEqual({ echoed: 'SECRET-schedule-child-out-SECRET' });

    const stored = await everything(engine.redis, engine.client.keys.base);
    expect(stored.length).toBeGreaterThan(20);
    expect(stored.filter((text) => text.includes('SECRET'))).toEqual([]);
    // What indexes, the dashboard and the CLI need stays readable.
    expect(stored).toEqual(expect.arrayContaining(['codec-parent', 'succeeded', 'approve']));
    expect([...(await keyIdsInUse(engine.redis, engine.client.keys.base)).keys()]).toEqual(['k1']);
  });

  it('reads encoded payloads only with the codec: a named error without it, "encrypted" for display, the key id when it is missing or wrong', async () => {
    engine = new TestEngine({ codec: codecV1() });
    const wf = engine.define('codec-keys', {}, async ({ input }) => input);
    await engine.worker();
    const handle = await engine.client.start(wf, { pin: 1234 });
    await handle.result({ timeout: '5s' });
    const reader = (codec?: ReturnType<typeof codecV1>) => createClient({ redis: engine.redis, prefix: engine.prefix, codec });

    const plain = reader();
    const error = await plain.getRun(handle.id).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PayloadCodecError);
    expect((error as Error).message).toBe(
      `The input of run "${handle.id}" could not be read or written by the payload codec: it is stored encoded by a payload codec (aes-256-gcm, key "k1") and this client has none. Give it the same codec option as the processes that write runs, with their keys.`,
    );
    // The dashboard's and the CLI's reading: the run, with what cannot be decoded shown as such.
    const display = plain.context.payloads.forDisplay();
    const [input] = [display.openText(await engine.redis.hget(engine.client.keys.run(handle.id), 'input'), 'input', { kind: 'input' })];
    expect(input).toEqual({ encrypted: 'aes-256-gcm, key "k1"' });

    const missing = await reader(aesGcmCodec({ keys: { k2: K2 }, current: 'k2' }))
      .getRun(handle.id)
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(PayloadKeyError);
    expect(missing).toMatchObject({ keyId: 'k1', reason: 'unknown', knownKeys: ['k2'] });
    expect((missing as Error).message).toContain('Add key "k1" to the codec\'s keys');

    const wrong = await reader(aesGcmCodec({ keys: { k1: K2 }, current: 'k1' }))
      .getRun(handle.id)
      .catch((e: unknown) => e);
    expect(wrong).toBeInstanceOf(PayloadKeyError);
    expect(wrong).toMatchObject({ keyId: 'k1', reason: 'mismatch' });
    expect((await reader(codecV2()).getRun(handle.id))?.output).toEqual({ pin: 1234 });
    await Promise.all([plain.close()]);
  });

  it('a worker without the key fails the attempt with PayloadKeyError, retryably: a worker with the key finishes the run', async () => {
    engine = new TestEngine({ codec: codecV1() });
    const wf = engine.define('codec-worker-keys', { retries: { maxAttempts: 3, delay: 10 } }, async ({ input }) => input);
    const lacking = createClient({
      redis: engine.redis,
      prefix: engine.prefix,
      registry: engine.registry,
      codec: aesGcmCodec({ keys: { k2: K2 }, current: 'k2' }),
    });
    const { startWorker } = await import('../../lib/core');
    const bad = await startWorker({ app: 'lacking', client: lacking, registry: engine.registry, logFailedRuns: false, runtime: { blockTimeout: 100 } });
    const handle = await engine.client.start(wf, { secret: 'SECRET' });
    const [first] = await eventually(async () => {
      const attempts = await engine.client.getRunAttempts(handle.id);
      return attempts.length ? attempts : undefined;
    });
    await bad.stop();
    expect(first.error).toMatchObject({ name: 'PayloadKeyError', message: expect.stringContaining('encrypted with key "k1", which this codec does not have') });
    await engine.worker();
    await expect(handle.result({ timeout: '5s' })).resolves.toEqual({ secret: 'SECRET' });
    await lacking.close();
  });

  it('rotates to a new key while runs wait, and the runs finish with every payload under the new key', async () => {
    engine = new TestEngine({ codec: codecV1() });
    const wf = engine.define('codec-rotate', {}, async ({ input, step }) => {
      const first = await step.run('first', () => ({ n: (input as { n: number }).n, secret: 'SECRET-first' }));
      const approved = await step.waitForSignal<{ ok: boolean }>('approval', 'approve');
      return { first, approved };
    });
    const oldWorker = await engine.worker();
    const handles = await Promise.all([1, 2, 3].map((n) => engine.client.start(wf, { n })));
    for (const h of handles) await eventually(async () => (await engine.client.getRunSteps(h.id)).find((s) => s.name === 'approval')?.status === 'waiting');
    // A signal buffered for a run that is not waiting for it yet is rotated too.
    await engine.client.signal(handles[0].id, 'later', { SECRET: 'buffered' });
    expect([...(await keyIdsInUse(engine.redis, engine.client.keys.base)).keys()]).toEqual(['k1']);
    await oldWorker.stop();

    // The deploy with the new key: k2 current, k1 kept to read what is stored.
    const next = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, codec: codecV2() });
    const batches: number[] = [];
    const report = await createAdmin(next).rotatePayloads({ onBatch: (r) => batches.push(r.rotated) });
    expect(report.rotated).toBeGreaterThanOrEqual(6); // per run: the input and the first step's record
    expect(report.skipped).toBe(0);
    expect(batches.length).toBeGreaterThan(0);
    expect([...(await keyIdsInUse(engine.redis, engine.client.keys.base)).keys()]).toEqual(['k2']);
    // A second pass finds nothing left to do.
    expect((await createAdmin(next).rotatePayloads()).rotated).toBe(0);

    const { startWorker } = await import('../../lib/core');
    const worker = await startWorker({ app: 'rotated', client: next, registry: engine.registry, runtime: { blockTimeout: 100, reaperInterval: 100 } });
    for (const h of handles) await next.signal(h.id, 'approve', { ok: true });
    const onlyK2 = createClient({ redis: engine.redis, prefix: engine.prefix, codec: aesGcmCodec({ keys: { k2: K2 }, current: 'k2' }) });
    for (const [i, h] of handles.entries()) {
      await expect(onlyK2.waitForRun(h.id, { timeout: '10s' })).resolves.toEqual({ first: { n: i + 1, secret: 'SECRET-first' }, approved: { ok: true } });
    }
    expect([...(await keyIdsInUse(engine.redis, engine.client.keys.base)).keys()]).toEqual(['k2']);
    await worker.stop();
    await Promise.all([next.close(), onlyK2.close()]);
  });

  it('compresses large payloads before encrypting them, and stores a string that looks like an envelope as itself', async () => {
    engine = new TestEngine({ codec: aesGcmCodec({ keys: { k1: K1 }, current: 'k1', compress: { minBytes: 512 } }) });
    const tricky = '\u0001rfc:AAAA';
    const wf = engine.define('codec-compress', {}, async ({ input, step }) => {
      await step.run('tricky', () => tricky);
      return input;
    });
    await engine.worker();
    const big = { rows: Array.from({ length: 200 }, (_, i) => ({ id: i, name: 'the same long name again and again' })) };
    const handle = await engine.client.start(wf, big);
    await expect(handle.result({ timeout: '5s' })).resolves.toEqual(big);
    const storedInput = (await engine.redis.hget(engine.client.keys.run(handle.id), 'input'))!;
    expect(storedInput.length).toBeLessThan(JSON.stringify(big).length / 4);
    expect((await engine.client.getRunSteps(handle.id))[0].output).toBe(tricky);

    // Without a codec a user's string that starts with the envelope's mark reads back unchanged.
    const plainEngine = new TestEngine();
    try {
      const echo = plainEngine.define('codec-echo', {}, async ({ input, step }) => step.run('echo', () => input));
      await plainEngine.worker();
      const run = await plainEngine.client.start(echo, tricky);
      await expect(run.result({ timeout: '5s' })).resolves.toBe(tricky);
      expect((await plainEngine.client.getRun(run.id))?.input).toBe(tricky);
    } finally {
      await plainEngine.close();
    }
  });
});
