/**
 * Cost budgets of a run, counted by Redis itself on a redis-server of this file's own (no other
 * client, so every command is ours): not timed, so the same code gives the same numbers.
 *
 *   - commands per run: `INFO commandstats`, which counts every command a script runs as well as
 *     the script call. Per run = (cost of 2N runs - cost of N runs) / N, so what is done once
 *     (loading the scripts, a worker's start, its first claim, going idle) cancels out.
 *   - bytes per finished run: `MEMORY USAGE ... SAMPLES 0` of every key of the prefix, after N
 *     runs minus before, over N.
 *
 * A change that raises a number here changes it in this file, in the same commit, with its
 * reason. docs/performance.md explains each command of a run.
 */
import { Redis } from 'ioredis';

import type { WorkflowContext, WorkflowDefinition } from '../../lib';
import { loadLibrary } from '../../lib/core/store/scripts/script-loader';
import { RedflowTestEngine } from '../../lib/testing/core';
import { TestRedisServer } from '../../lib/testing/redis-server';
import { clusterMode, eventually } from '../support/engine';

/**
 * Commands per one-step run, by name: enqueue (start) and processing (claim, step, finish). Every
 * claim looks whether its queue is paused (one HEXISTS of `queues:paused`: pausing a queue), and
 * at the head of its priority zset (one ZRANGE of an empty key: priorities).
 */
const ONE_STEP = {
  enqueue: { script: 1, hset: 1, zadd: 1, sadd: 1, rpush: 1, xadd: 1 },
  processing: { script: 1, lpop: 1, hexists: 1, zrange: 1, hmget: 2, hget: 1, hset: 2, zrem: 3, zadd: 4, xadd: 1, publish: 1 },
};
/**
 * A one-step run with a priority: its enqueue keeps FIFO order within the priority (`prio-last`:
 * HGET, HSET), puts it in the priority zset (ZADD, for RPUSH) and sets the queue's mark (HSETNX);
 * its claim compares the zset's head with the list's (ZRANGE, LINDEX) and takes it (ZREM, for LPOP).
 */
const PRIORITY = {
  enqueue: { script: 1, hset: 2, hget: 1, hsetnx: 1, zadd: 2, sadd: 1, xadd: 1 },
  processing: { script: 1, lindex: 1, hexists: 1, zrange: 1, hmget: 2, hget: 1, hset: 2, zrem: 4, zadd: 4, xadd: 1, publish: 1 },
};
/**
 * A one-step run under a concurrency key: its enqueue goes to the key's list (RPUSH, instead of
 * the ready list's; a key whose list was empty also looks for its place, once per key here); its
 * claim pops the key's place, counts the key's runs (ZCARD), pops the key's run (LPOP) and puts the
 * place back (RPUSH), takes a slot (ZADD); its end gives it back (ZREM, which also says whether
 * the key waits out of the list: no look at its place).
 */
const KEYED = {
  enqueue: { script: 1, hset: 1, zadd: 1, sadd: 1, rpush: 1, xadd: 1 },
  processing: { script: 1, lpop: 2, rpush: 1, hexists: 1, zrange: 1, zcard: 1, hmget: 2, hget: 1, hset: 2, zrem: 4, zadd: 5, xadd: 1, publish: 1 },
};
/** Commands per 10-step run while processing (one checkpoint per step but the last, which finish carries). */
const TEN_STEP = {
  processing: { script: 10, lpop: 1, hexists: 1, zrange: 1, hmget: 11, hget: 1, hset: 11, zrem: 3, zadd: 4, xadd: 10, publish: 1 },
};
/**
 * Commands per parent run that waits on a child run, the child included (the child is started by the parent's step).
 * The parent's suspension indexes its wait (`waiting:child`: 1 ZADD; the `wait` field rides in
 * finish's HSET), and its wake-up, which moves it out of `scheduled`, reads the field and takes
 * it and its entry away (1 HGET, 1 HDEL, 1 ZREM): what `waitingFor` and the `waiting` filter cost.
 */
const CHILD_WAIT = {
  enqueue: { script: 1, hset: 1, zadd: 1, sadd: 1, rpush: 1, xadd: 1 },
  processing: {
    script: 4,
    lpop: 3,
    lpush: 1,
    rpush: 1,
    exists: 1,
    hmget: 9,
    hget: 6,
    hgetall: 1,
    hset: 11,
    hdel: 3,
    // Three claims (the parent twice, the child once), each looking whether its queue is paused
    // and at the head of its priority zset.
    hexists: 3,
    zrange: 3,
    zadd: 14,
    zrem: 12,
    sadd: 3,
    smembers: 1,
    del: 1,
    xadd: 4,
    publish: 2,
  },
};
/** Bytes per finished one-step run: its hash and index entries (keys), and its events (stream). */
const BYTES_PER_RUN = { keys: 665, stream: 345, streamText: 305 };

const RUNTIME = { leaseMs: 120_000, heartbeatMs: 60_000, reaperIntervalMs: 60_000, blockTimeoutMs: 60_000, cleanupIntervalMs: 60_000 };
const IGNORED = new Set(['info', 'config|resetstat', 'memory|usage', 'scan', 'ping']);

const SCRIPT_CALLS = new Set(['eval', 'evalsha', 'fcall']);

// The budgets hold for the engine, not for a topology: counted once, on a standalone server.
const describeStandalone = clusterMode ? describe.skip : describe;

describeStandalone('cost budgets (commands and bytes per run, counted by Redis)', () => {
  let server: TestRedisServer;
  let admin: Redis;

  beforeAll(async () => {
    server = TestRedisServer.start();
    admin = new Redis({ path: server.socket });
    // Loaded once for the whole file, so that no scenario pays for the load and others not.
    await admin.call('FUNCTION', 'LOAD', loadLibrary().code);
  });
  afterAll(async () => {
    admin.disconnect();
    await server.stop();
  });

  /** Commands by name since the last CONFIG RESETSTAT, the probe's own left out; script calls as `script`. */
  async function commandCounts(): Promise<Record<string, number>> {
    const stats = await admin.info('commandstats');
    const counts: Record<string, number> = {};
    for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
      if (IGNORED.has(m[1])) continue;
      // A script call is one, whichever way it was sent (a first EVAL loads what EVALSHA calls later).
      const name = SCRIPT_CALLS.has(m[1]) ? 'script' : m[1];
      counts[name] = (counts[name] ?? 0) + Number(m[2]);
    }
    return counts;
  }

  async function measure(fn: () => Promise<void>): Promise<Record<string, number>> {
    await admin.config('RESETSTAT');
    await fn();
    return commandCounts();
  }

  /** Per run: (b - a) / n for every command name, where b counted 2n runs and a counted n. */
  function perRun(a: Record<string, number>, b: Record<string, number>, n: number): Record<string, number> {
    const out: Record<string, number> = {};
    for (const name of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = ((b[name] ?? 0) - (a[name] ?? 0)) / n;
      if (d !== 0) out[name] = d;
    }
    return out;
  }

  /** A fresh engine (its own prefix) on this file's server, so every scenario starts alike. */
  async function withEngine<T>(fn: (engine: RedflowTestEngine) => Promise<T>): Promise<T> {
    const engine = new RedflowTestEngine({ redis: new Redis({ path: server.socket }) });
    try {
      // The (workflow, status) index of an empty prefix is built at once: no backfill runs below.
      await engine.client.backfillRunIndex();
      return await fn(engine);
    } finally {
      await engine.close();
      engine.redis.disconnect();
    }
  }

  /**
   * Enqueues `n` runs of `wf` (counted apart), then starts one worker at concurrency 1 and counts
   * everything until every run succeeded and the worker waits, idle, for more.
   */
  async function processRuns(engine: RedflowTestEngine, wf: WorkflowDefinition<{ i: number }, unknown>, n: number, completions = n) {
    const enqueue = await measure(async () => {
      for (let i = 0; i < n; i++) await engine.client.start(wf, { i });
    });
    let done = 0;
    const processing = await measure(async () => {
      await engine.worker({ concurrency: 1, runtime: RUNTIME, hooks: { onRunComplete: () => void done++ } });
      await eventually(() => done === completions);
      // Idle: the worker's one blocking wait for new runs.
      await eventually(async () => (await commandCounts()).blmove === 1);
    });
    return { enqueue, processing };
  }

  it('a one-step run: the commands of its enqueue and of its processing', async () => {
    const scenario = (n: number) =>
      withEngine(async (engine) => {
        const wf = engine.registry.define('one', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) =>
          step.run('work', () => ({ i: input.i })),
        );
        return processRuns(engine, wf, n);
      });
    const a = await scenario(5);
    const b = await scenario(10);
    expect(perRun(a.enqueue, b.enqueue, 5)).toEqual(ONE_STEP.enqueue);
    expect(perRun(a.processing, b.processing, 5)).toEqual(ONE_STEP.processing);
  });

  it('a one-step run with a priority, and one under a concurrency key: what each adds', async () => {
    const scenario = (n: number, options: { priority?: number; concurrency?: { key: string; limit: number } }) =>
      withEngine(async (engine) => {
        const wf = engine.registry.define('one', { maxConcurrency: Infinity, ...options }, async ({ input, step }: WorkflowContext<{ i: number }>) =>
          step.run('work', () => ({ i: input.i })),
        );
        return processRuns(engine, wf, n);
      });
    for (const [options, budget] of [
      [{ priority: 1 }, PRIORITY],
      [{ concurrency: { key: 'tenant', limit: 5 } }, KEYED],
    ] as const) {
      const a = await scenario(5, options);
      const b = await scenario(10, options);
      expect({ enqueue: perRun(a.enqueue, b.enqueue, 5), processing: perRun(a.processing, b.processing, 5) }).toEqual(budget);
    }
  });

  it('a ten-step run: the commands of its processing', async () => {
    const scenario = (n: number) =>
      withEngine(async (engine) => {
        const wf = engine.registry.define('ten', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
          let total = 0;
          for (let s = 0; s < 10; s++) total += await step.run(`s${s}`, () => input.i + s);
          return total;
        });
        return processRuns(engine, wf, n);
      });
    const a = await scenario(5);
    const b = await scenario(10);
    const processing = perRun(a.processing, b.processing, 5);
    expect(processing).toEqual(TEN_STEP.processing);
  });

  it('a run that waits on a child run: the commands of both, enqueue to end', async () => {
    const scenario = (n: number) =>
      withEngine(async (engine) => {
        const child = engine.registry.define('child', { maxConcurrency: Infinity }, async ({ input, step }) =>
          step.run('c', () => (input as { i: number }).i * 2),
        );
        const parent = engine.registry.define('parent', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) => {
          const doubled = await step.runWorkflow('child', child, { i: input.i });
          return step.run('after', () => doubled + 1);
        });
        // Each parent and each child completes: 2n completions.
        return processRuns(engine, parent, n, 2 * n);
      });
    const a = await scenario(5);
    const b = await scenario(10);
    expect({ enqueue: perRun(a.enqueue, b.enqueue, 5), processing: perRun(a.processing, b.processing, 5) }).toEqual(CHILD_WAIT);
  });

  it('a finished one-step run keeps at most its budget of bytes in Redis', async () => {
    const { keys, stream, streamText } = await withEngine(async (engine) => {
      const wf = engine.registry.define('bytes', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ i: number }>) =>
        step.run('work', () => ({ ok: true, i: input.i })),
      );
      const streamKey = engine.client.keys.events();
      const usage = async () => {
        let total = 0;
        let cursor = '0';
        do {
          const [next, found] = await admin.scan(cursor, 'MATCH', `{${engine.prefix}}:*`, 'COUNT', 1000);
          cursor = next;
          for (const key of found) if (key !== streamKey) total += Number(await admin.memory('USAGE', key, 'SAMPLES', 0));
        } while (cursor !== '0');
        return { keys: total, stream: Number((await admin.memory('USAGE', streamKey, 'SAMPLES', 0)) ?? 0) };
      };
      // What the engine writes to the stream: its entries' field names and values, in bytes.
      const streamText = async (after: string) =>
        ((await admin.xrange(streamKey, `(${after}`, '+')) as Array<[string, string[]]>).reduce(
          (sum, [, fields]) => sum + fields.reduce((n, f) => n + Buffer.byteLength(f), 0),
          0,
        );
      const lastId = async () => ((await admin.xrevrange(streamKey, '+', '-', 'COUNT', 1)) as Array<[string, string[]]>)[0]?.[0] ?? '0-0';
      await engine.worker({ concurrency: 1, runtime: RUNTIME });
      await engine.client.start(wf, { i: -1 }).then((h) => h.result());
      const before = await usage();
      const from = await lastId();
      const n = 200;
      const handles = [];
      for (let i = 0; i < n; i++) handles.push(await engine.client.start(wf, { i }));
      for (const h of handles) await h.result();
      const after = await usage();
      return { keys: (after.keys - before.keys) / n, stream: (after.stream - before.stream) / n, streamText: (await streamText(from)) / n };
    });
    // The run's hash and its index entries: the same for every run but for a duration's digits.
    expect(keys).toBeLessThanOrEqual(BYTES_PER_RUN.keys);
    // Not far under either: a budget well above the cost hides the next increase.
    expect(keys).toBeGreaterThan(BYTES_PER_RUN.keys * 0.95);
    // Its events in the stream (3 per one-step run, MAXLEN ~100,000). What the engine writes, the
    // entries' fields and values, is the budget; the same but for a duration's digits.
    expect(streamText).toBeLessThanOrEqual(BYTES_PER_RUN.streamText);
    expect(streamText).toBeGreaterThan(BYTES_PER_RUN.streamText * 0.95);
    // The memory Redis spends on them also holds entry ids and times, stored as deltas whose size
    // depends on the time between entries (a loaded machine spends more): a loose bound only.
    expect(stream).toBeLessThanOrEqual(BYTES_PER_RUN.stream * 1.25);
  });
});
