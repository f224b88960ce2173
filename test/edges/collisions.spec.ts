import { Cluster } from 'ioredis';

import { ConfigurationError, createAdmin, createClient, type RedisConnection, type RunHandle, type WorkflowClient, type WorkflowContext } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

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

/** Counts handlers inside a section: the current number and the highest it reached. */
function tracker() {
  let current = 0;
  let peak = 0;
  return {
    enter() {
      peak = Math.max(peak, ++current);
    },
    exit() {
      current--;
    },
    get current() {
      return current;
    },
    get peak() {
      return peak;
    },
  };
}

/** What a promise rejected with (fails the test if it resolved). */
async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    (value) => {
      throw new Error(`Expected a rejection, got ${JSON.stringify(value)}`);
    },
    (error: unknown) => error,
  );
}

describe('user-chosen names that look like internal keys', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const base = () => engine.client.keys.base;

  it('a mutex named "m" and one named "m:parked" are two mutexes: no WRONGTYPE, each serializes its own runs, the two overlap', async () => {
    const inside = { m: tracker(), 'm:parked': tracker() };
    const both = tracker();
    const release = deferred();
    const define = (name: string, mutex: 'm' | 'm:parked') =>
      engine.registry.define(name, { mutex, maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ n: number }>) => {
        inside[mutex].enter();
        both.enter();
        try {
          await step.run('work', async () => {
            await release.promise;
            await sleep(20);
          });
          return `${mutex}/${input.n}`;
        } finally {
          both.exit();
          inside[mutex].exit();
        }
      });
    const plain = define('holds-m', 'm');
    const lookalike = define('holds-m-parked', 'm:parked');
    await engine.worker({ concurrency: 4 });

    const handles = await Promise.all([
      ...[0, 1, 2, 3].map((n) => engine.client.start(plain, { n })),
      ...[0, 1, 2, 3].map((n) => engine.client.start(lookalike, { n })),
    ]);

    // One holder per mutex runs; the three others of each wait parked on their own mutex.
    const parkedOn = (key: string) => engine.redis.lrange(`${base()}mutex-parked:${key}`, 0, -1);
    await eventually(
      async () => inside.m.current === 1 && inside['m:parked'].current === 1 && (await parkedOn('m')).length === 3 && (await parkedOn('m:parked')).length === 3,
    );
    expect(both.current).toBe(2);
    const types = await Promise.all([`mutex:m`, `mutex:m:parked`, `mutex-parked:m`, `mutex-parked:m:parked`].map((k) => engine.redis.type(`${base()}${k}`)));
    expect(types).toEqual(['string', 'string', 'list', 'list']);
    const holderM = await engine.redis.get(`${base()}mutex:m`);
    const holderP = await engine.redis.get(`${base()}mutex:m:parked`);
    expect(handles.slice(0, 4).map((h) => h.id)).toContain(holderM);
    expect(handles.slice(4).map((h) => h.id)).toContain(holderP);
    expect((await parkedOn('m')).sort()).toEqual(
      handles
        .slice(0, 4)
        .map((h) => h.id)
        .filter((id) => id !== holderM)
        .sort(),
    );
    expect((await parkedOn('m:parked')).sort()).toEqual(
      handles
        .slice(4)
        .map((h) => h.id)
        .filter((id) => id !== holderP)
        .sort(),
    );

    release.resolve();
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 10_000 })));
    expect(results).toEqual(['m/0', 'm/1', 'm/2', 'm/3', 'm:parked/0', 'm:parked/1', 'm:parked/2', 'm:parked/3']);
    const states = await Promise.all(handles.map((h) => h.getState()));
    expect(states.map((s) => [s?.status, s?.attempt, s?.error])).toEqual(handles.map(() => ['succeeded', 1, undefined]));
    expect(inside.m.peak).toBe(1);
    expect(inside['m:parked'].peak).toBe(1);
    expect(both.peak).toBe(2);
    expect(await scanKeys(engine.redis, `${base()}mutex*`)).toEqual([]);
  });

  describe('step names', () => {
    it('an explicit "charge#2" is rejected with ConfigurationError; two plain "charge" steps get "charge" and "charge#2"', async () => {
      const explicit = engine.registry.define('explicit-suffix', { maxAttempts: 3 }, async ({ step }) => {
        await step.run('charge#2', () => 'never');
        return 'unreachable';
      });
      let calls = 0;
      const repeated = engine.registry.define('repeated-charge', {}, async ({ step }) => {
        const first = await step.run('charge', () => ({ amount: 1 }));
        const second = await step.run('charge', () => ({ amount: 2 }));
        return [first, second];
      });
      const afterRepeats = engine.registry.define('charge-then-explicit', { maxAttempts: 3 }, async ({ step }) => {
        await step.run('charge', () => 'a');
        await step.run('charge', () => 'b');
        await step.run('charge#2', () => {
          calls++;
          return 'clobbered';
        });
      });
      await engine.worker();

      const bad = await engine.client.start(explicit, {});
      const error = await rejection(bad.result({ timeoutMs: 5_000 }));
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as Error).message).toContain('"charge#2"');
      expect((error as Error).message).toContain('"#"');
      // ConfigurationError is permanent: one attempt of three.
      expect(await bad.getState()).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'ConfigurationError', message: (error as Error).message } });
      expect(await engine.client.getRunSteps(bad.id)).toEqual([]);

      const good = await engine.client.start(repeated, {});
      await expect(good.result({ timeoutMs: 5_000 })).resolves.toEqual([{ amount: 1 }, { amount: 2 }]);
      const steps = await engine.client.getRunSteps(good.id);
      expect(steps.map((s) => [s.name, s.status, s.output])).toEqual([
        ['charge', 'succeeded', { amount: 1 }],
        ['charge#2', 'succeeded', { amount: 2 }],
      ]);

      // After two plain calls, an explicit "charge#2" cannot overwrite the second one's record.
      const late = await engine.client.start(afterRepeats, {});
      await expect(late.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(ConfigurationError);
      expect(calls).toBe(0);
      expect(await late.getState()).toMatchObject({ status: 'failed', attempt: 1 });
      expect((await engine.client.getRunSteps(late.id)).map((s) => [s.name, s.status, s.output])).toEqual([
        ['charge', 'succeeded', 'a'],
        ['charge#2', 'succeeded', 'b'],
      ]);
    });

    it('a step name with "|" is rejected with ConfigurationError', async () => {
      let calls = 0;
      const wf = engine.registry.define('pipe-step', { maxAttempts: 3 }, async ({ step }) => {
        await step.run('a|b', () => ++calls);
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      const error = await rejection(handle.result({ timeoutMs: 5_000 }));
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as Error).message).toContain('"a|b"');
      expect((error as Error).message).toContain('"|"');
      expect(calls).toBe(0);
      expect(await handle.getState()).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'ConfigurationError' } });
      expect(await engine.client.getRunSteps(handle.id)).toEqual([]);
    });
  });

  it('"<id>:children" and "<id>:waiters" are not runs: getRun is null, getRunSteps is [], cancelRun is false', async () => {
    const gate = deferred();
    const childStarted = deferred();
    const child = engine.registry.define('gated-child', { maxConcurrency: Infinity }, async () => {
      childStarted.resolve();
      await gate.promise;
      return 'child done';
    });
    const parent = engine.registry.define('waiting-parent', { maxConcurrency: Infinity }, async ({ step }) => {
      return { child: await step.runWorkflow('child', child, {}) };
    });
    await engine.worker();

    const handle = await engine.client.start(parent, {});
    const childId = `${handle.id}.child`;
    await childStarted.promise;
    await eventually(async () => (await handle.getState())?.status === 'scheduled');
    // The sets exist: the parent waits on the child, the child has a waiter.
    expect(await engine.client.getRunChildren(handle.id)).toEqual([childId]);
    expect(await engine.redis.smembers(`${base()}waiters:${childId}`)).toEqual([`${handle.id}|s:child`]);

    for (const id of [handle.id, childId]) {
      for (const suffix of [':children', ':waiters']) {
        expect(await engine.client.getRun(id + suffix)).toBeNull();
        expect(await engine.client.getRunSteps(id + suffix)).toEqual([]);
        expect(await engine.client.cancelRun(id + suffix)).toBe(false);
      }
    }
    // Nothing was touched: both runs go on and end normally.
    expect(await engine.client.getRun(childId)).toMatchObject({ status: 'running' });
    expect(await handle.getState()).toMatchObject({ status: 'scheduled' });
    gate.resolve();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ child: 'child done' });
    expect(await engine.client.getRun(childId)).toMatchObject({ status: 'succeeded', parentId: handle.id });
    expect(await scanKeys(engine.redis, `${base()}run:*`)).toEqual([`${base()}run:${handle.id}`, `${base()}run:${childId}`].sort());
  });

  describe('resetState', () => {
    const extra: WorkflowClient[] = [];
    afterEach(async () => {
      for (const client of extra.splice(0)) {
        await createAdmin(client).resetState();
        await client.close();
      }
    });

    it('deletes exactly its prefix: not "P:x", "Px" or "P-x"', async () => {
      const wf = engine.registry.define('kept', {}, (): null => null);
      const P = engine.prefix;
      const others = [`${P}:x`, `${P}x`, `${P}-x`];
      const clientFor = (prefix: string) => {
        const client = createClient({ redis: engine.redis, prefix, registry: engine.registry });
        extra.push(client);
        return client;
      };
      const runs: Record<string, RunHandle<null>> = {};
      for (const prefix of [P, ...others]) {
        const client = prefix === P ? engine.client : clientFor(prefix);
        await client.syncRegistry(engine.registry, { owner: 'test-app' });
        runs[prefix] = await client.start(wf, {}, { idempotencyKey: 'once' });
      }
      const keysOf = (prefix: string) => scanKeys(engine.redis, `{${prefix}}:*`);
      for (const prefix of [P, ...others]) {
        expect(await keysOf(prefix)).toEqual(
          expect.arrayContaining([`{${prefix}}:run:${runs[prefix].id}`, `{${prefix}}:workflow:kept`, `{${prefix}}:idem:kept|once`]),
        );
      }
      const before = Object.fromEntries(await Promise.all(others.map(async (p) => [p, await keysOf(p)] as const)));

      await createAdmin(engine.client).resetState();

      expect(await keysOf(P)).toEqual([]);
      expect(await scanKeys(engine.redis, `*${P}}*`)).toEqual([]);
      for (const prefix of others) {
        expect(await keysOf(prefix)).toEqual(before[prefix]);
        const client = extra[others.indexOf(prefix)];
        expect(await client.getRun(runs[prefix].id)).toMatchObject({ workflow: 'kept', status: 'queued' });
      }
    });

    it('a prefix with braces is refused by createClient before anything is written', async () => {
      const create = () => createClient({ redis: engine.redis, prefix: 'a}:x{', registry: engine.registry });
      expect(create).toThrow(ConfigurationError);
      expect(create).toThrow(/"\{" or "\}"/);
      expect(await scanKeys(engine.redis, '*a}:x{*')).toEqual([]);
    });
  });

  it('debounce and throttle keys that look like internal keys ("x|y", "a:b") are independent of each other', async () => {
    const debounced: string[] = [];
    const deb = engine.registry.define(
      'deb',
      { maxConcurrency: Infinity, debounce: { key: (input: { key: string; n: number }) => input.key, period: 250 } },
      ({ input }) => {
        debounced.push(`${input.key}/${input.n}`);
        return input;
      },
    );
    const thr = engine.registry.define(
      'thr',
      { maxConcurrency: Infinity, throttle: { key: (input: { key: string; n: number }) => input.key, limit: 1, period: 600 } },
      ({ input }) => input,
    );
    await engine.worker({ concurrency: 8 });

    // Debounce: the two starts with "x|y" merge; "x", "y" and "x|y|z" are keys of their own.
    const d1 = await engine.client.start(deb, { key: 'x|y', n: 1 });
    const d2 = await engine.client.start(deb, { key: 'x|y', n: 2 });
    const dx = await engine.client.start(deb, { key: 'x', n: 3 });
    const dy = await engine.client.start(deb, { key: 'y', n: 4 });
    const dz = await engine.client.start(deb, { key: 'x|y|z', n: 5 });
    // Throttle: one start per key per 600 ms; the same strings as the debounce keys, and "a:b" next to "a" and "a:b:c".
    const t1 = await engine.client.start(thr, { key: 'a:b', n: 1 });
    const tOthers = await Promise.all(['a', 'a:b:c', 'x|y', 'x'].map((key, i) => engine.client.start(thr, { key, n: 10 + i })));
    const t2 = await engine.client.start(thr, { key: 'a:b', n: 2 });

    expect(d2.id).toBe(d1.id);
    expect(new Set([d1.id, dx.id, dy.id, dz.id]).size).toBe(4);
    expect(await engine.redis.type(`${base()}debounce:deb|x|y`)).toBe('string');
    expect(await engine.redis.get(`${base()}debounce:deb|x|y`)).toBe(d1.id);

    await expect(d1.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'x|y', n: 2 });
    await expect(dx.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'x', n: 3 });
    await expect(dy.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'y', n: 4 });
    await expect(dz.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'x|y|z', n: 5 });
    expect(debounced.sort()).toEqual(['x/3', 'x|y/2', 'x|y|z/5', 'y/4']);
    expect(await engine.client.listRuns({ workflow: 'deb' })).toHaveLength(4);

    await expect(t1.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'a:b', n: 1 });
    await Promise.all(tOthers.map((h) => h.result({ timeoutMs: 5_000 })));
    await expect(t2.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'a:b', n: 2 });
    const first = (await t1.getState())!;
    const second = (await t2.getState())!;
    // Only the second "a:b" waited for its window; every other key started at once.
    expect(second.startedAt! - first.startedAt!).toBeGreaterThanOrEqual(600);
    expect(second.attempt).toBe(1);
    for (const state of await Promise.all(tOthers.map((h) => h.getState()))) {
      expect(state).toMatchObject({ status: 'succeeded', attempt: 1 });
      expect(state!.startedAt! - state!.createdAt).toBeLessThan(400);
    }
    expect(first.startedAt! - first.createdAt).toBeLessThan(400);
  });

  it('rate-limit keys and event names that look like internal keys ("a:b", "x|y", "run:r1") are independent of each other', async () => {
    const limited = engine.registry.define(
      'rl',
      { maxConcurrency: Infinity, rateLimit: { key: (input: { key: string }) => input.key, limit: 1, period: '1m' } },
      ({ input }) => input.key,
    );
    const heard: string[] = [];
    for (const event of ['run:r1', 'a:b', 'a', 'evwait:x']) {
      engine.registry.define(`hear-${event.replace(/:/g, '-')}`, { maxConcurrency: Infinity, event: [{ name: event }] }, () => {
        heard.push(event);
        return event;
      });
    }
    await engine.worker({ concurrency: 8 });

    // One run per key in the window: "a:b", "a", "a:b:c" and "x|y" each have their own.
    const firsts = await Promise.all(['a:b', 'a', 'a:b:c', 'x|y'].map((key) => engine.client.start(limited, { key })));
    await expect(Promise.all(firsts.map((h) => h.result({ timeoutMs: 5_000 })))).resolves.toEqual(['a:b', 'a', 'a:b:c', 'x|y']);
    const again = await engine.client.start(limited, { key: 'a:b' });
    await expect(again.result({ timeoutMs: 5_000 })).rejects.toMatchObject({ name: 'RateLimitExceededError' });

    // Each event reaches its own subscriber only, and none is mistaken for a run or a wait.
    for (const event of ['run:r1', 'a:b', 'a', 'evwait:x']) {
      const [runId] = await engine.client.emitEvent(event, {});
      await expect(engine.client.handle(runId).result({ timeoutMs: 5_000 })).resolves.toBe(event);
    }
    expect(heard).toEqual(['run:r1', 'a:b', 'a', 'evwait:x']);
    expect(await engine.client.getRun('r1')).toBeNull();
  });
});
