import { join } from 'node:path';

import { NonRetriableError, RateLimitExceededError, type RunHandle, type RunStatus, type WorkflowContext } from '../../lib';
import { defineSlotHolder, SLOT_HOLDER, startsKey, startTimesKey } from '../fixtures/flow-control-worker';
import { deferred, eventually, TestEngine } from '../support/engine';
import { killWorkerProcess, spawnWorkerProcess, whileAlive, type WorkerProcess } from '../support/worker-process';

const FIXTURE = join(__dirname, '..', 'fixtures', 'flow-control-worker.ts');
/** The child compiles the engine with SWC on start-up, so its first claim may take a few seconds. */
const CHILD_PATIENCE_MS = 15_000;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

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

describe('flow control', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const base = () => engine.client.keys.base;
  const active = (workflow: string) => engine.redis.zrange(`${base()}wf:${workflow}:active`, 0, '-1');
  const parked = (workflow: string) => engine.redis.lrange(`${base()}wf:${workflow}:parked`, 0, -1);
  const mutexHolder = (key: string) => engine.redis.get(`${base()}mutex:${key}`);
  const mutexParked = (key: string) => engine.redis.lrange(`${base()}mutex-parked:${key}`, 0, -1);
  const statusOf = async (handle: RunHandle<unknown>) => (await handle.getState())?.status;
  const statuses = async (handles: RunHandle<unknown>[]) => Promise.all(handles.map(statusOf));
  const count = (list: (RunStatus | undefined)[], status: RunStatus) => list.filter((s) => s === status).length;

  describe('maxConcurrency', () => {
    it('is counted across workers: runs over the limit wait parked, without using an attempt', async () => {
      const gate = deferred();
      const inside = tracker();
      const wf = engine.registry.define('limited', { maxConcurrency: 2 }, async ({ input }: { input: { n: number } }) => {
        inside.enter();
        try {
          await gate.promise;
          return input.n;
        } finally {
          inside.exit();
        }
      });
      const w1 = await engine.worker({ concurrency: 5 });
      const w2 = await engine.worker({ concurrency: 5 });
      expect(await engine.redis.hget(engine.client.keys.workflow('limited'), 'maxConcurrency')).toBe('2');

      const handles: RunHandle<number>[] = [];
      for (let n = 0; n < 8; n++) handles.push(await engine.client.start(wf, { n }));

      // Every run was claimed: 2 hold the workflow's slots, 6 are parked, with 8 of 10 worker slots free.
      await eventually(async () => (await active('limited')).length === 2 && (await parked('limited')).length === 6);
      await eventually(() => inside.current === 2);
      expect(w1.activeRunIds.length + w2.activeRunIds.length).toBe(2);
      const waiting = await Promise.all(handles.map((h) => h.getState()));
      expect(
        count(
          waiting.map((s) => s?.status),
          'running',
        ),
      ).toBe(2);
      expect(
        count(
          waiting.map((s) => s?.status),
          'queued',
        ),
      ).toBe(6);
      for (const state of waiting.filter((s) => s?.status === 'queued')) expect(state?.attempt).toBe(0);
      expect((await active('limited')).sort()).toEqual(
        waiting
          .filter((s) => s?.status === 'running')
          .map((s) => s!.id)
          .sort(),
      );

      gate.resolve();
      expect(await Promise.all(handles.map((h) => h.result({ timeoutMs: 5_000 })))).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(inside.peak).toBe(2);
      const done = await Promise.all(handles.map((h) => h.getState()));
      expect(done.map((s) => [s?.status, s?.attempt])).toEqual(handles.map(() => ['succeeded', 1]));
      expect(await active('limited')).toEqual([]);
      expect(await parked('limited')).toEqual([]);
    });

    it("has no limit by default: the workers' concurrency bounds the runs, as a BullMQ queue", async () => {
      const gate = deferred();
      const inside = tracker();
      const wf = engine.registry.define('default-limit', {}, async () => {
        inside.enter();
        try {
          await gate.promise;
        } finally {
          inside.exit();
        }
      });
      await engine.worker({ concurrency: 3 });
      expect(await engine.redis.hget(engine.client.keys.workflow('default-limit'), 'maxConcurrency')).toBe('0');
      const handles: RunHandle<unknown>[] = [];
      for (let n = 0; n < 4; n++) handles.push(await engine.client.start(wf, { n }));

      // Three run at once (the worker's concurrency), the fourth waits in the queue.
      await eventually(() => inside.current === 3);
      const waiting = await statuses(handles);
      expect([count(waiting, 'running'), count(waiting, 'queued')]).toEqual([3, 1]);

      gate.resolve();
      await Promise.all(handles.map((h) => h.result({ timeoutMs: 5_000 })));
      expect(inside.peak).toBe(3);
      expect((await Promise.all(handles.map((h) => h.getState()))).map((s) => s?.attempt)).toEqual([1, 1, 1, 1]);
    });

    it("follows the worker's defaultMaxConcurrency for workflows that set none", async () => {
      const gate = deferred();
      const inside = tracker();
      const wf = engine.registry.define('worker-default', {}, async () => {
        inside.enter();
        try {
          await gate.promise;
        } finally {
          inside.exit();
        }
      });
      await engine.worker({ concurrency: 4, defaultMaxConcurrency: 3 });
      expect(await engine.redis.hget(engine.client.keys.workflow('worker-default'), 'maxConcurrency')).toBe('3');
      const handles: RunHandle<unknown>[] = [];
      for (let n = 0; n < 5; n++) handles.push(await engine.client.start(wf, { n }));

      await eventually(async () => (await active('worker-default')).length === 3 && (await parked('worker-default')).length === 2);
      await eventually(() => inside.current === 3);
      const waiting = await statuses(handles);
      expect([count(waiting, 'running'), count(waiting, 'queued')]).toEqual([3, 2]);

      gate.resolve();
      await Promise.all(handles.map((h) => h.result({ timeoutMs: 5_000 })));
      expect(inside.peak).toBe(3);
      expect((await Promise.all(handles.map((h) => h.getState()))).map((s) => s?.attempt)).toEqual([1, 1, 1, 1, 1]);
    });

    describe('with a worker that crashes', () => {
      let child: WorkerProcess | undefined;

      afterEach(async () => {
        await killWorkerProcess(child);
        child = undefined;
      });

      function spawnChild(): WorkerProcess {
        child = spawnWorkerProcess(FIXTURE, { REDFLOW_FC_PREFIX: engine.prefix });
        return child;
      }

      const whileChildRuns = (check: () => Promise<boolean>) => whileAlive(child ? [child] : [], 'The flow-control worker', check, CHILD_PATIENCE_MS);

      it('frees the concurrency slot of a killed worker within one lease', async () => {
        const wf = defineSlotHolder(engine.registry, engine.redis, engine.prefix, 'parent');
        const starts = () => engine.redis.lrange(startsKey(engine.prefix), 0, -1);
        const proc = spawnChild();
        const first = await engine.client.start(wf, { n: 1 });
        await whileChildRuns(async () => (await starts()).join() === 'child:1');
        const second = await engine.client.start(wf, { n: 2 });
        // The child claims the second run too (it has a free worker slot) and parks it.
        await whileChildRuns(async () => (await parked(SLOT_HOLDER)).join() === second.id);

        expect(await first.getState()).toMatchObject({ status: 'running', attempt: 1 });
        expect(await engine.redis.hget(engine.client.keys.run(first.id), 'lease')).toContain(`:${proc.proc.pid}:`);
        expect(await second.getState()).toMatchObject({ status: 'queued', attempt: 0 });
        expect(await active(SLOT_HOLDER)).toEqual([first.id]);

        expect(proc.proc.kill('SIGKILL')).toBe(true);
        await expect(proc.exited).resolves.toEqual({ code: null, signal: 'SIGKILL' });
        const killedAt = Date.now();
        // Nothing renews the lease any more: this is when the slot may be freed.
        const leaseExpiry = Number(await engine.redis.zscore(engine.client.keys.leases(), first.id));
        expect(leaseExpiry).toBeLessThanOrEqual(killedAt + 1_000);

        await engine.worker(); // lease 1 s, reaper every 100 ms
        await expect(first.result({ timeoutMs: 5_000 })).resolves.toEqual({ by: 'parent', n: 1 });
        await expect(second.result({ timeoutMs: 5_000 })).resolves.toEqual({ by: 'parent', n: 2 });

        const [one, two] = [(await first.getState())!, (await second.getState())!];
        // The recovered attempt is given back; waiting for the slot used none.
        expect([one.attempt, two.attempt]).toEqual([1, 1]);
        // startedAt is each run's first start (the killed worker's claim of the first): the handlers'
        // own start times say when the recovered attempt and the parked run began here.
        const startedAt = async (key: string) => Number(await engine.redis.hget(startTimesKey(engine.prefix), key));
        const [recovered, unparked] = [await startedAt('parent:1'), await startedAt('parent:2')];
        expect(recovered).toBeGreaterThanOrEqual(leaseExpiry);
        expect(recovered - leaseExpiry).toBeLessThanOrEqual(500);
        expect(unparked).toBeGreaterThanOrEqual(one.finishedAt!);
        expect(one.startedAt).toBeLessThan(leaseExpiry);
        expect(await starts()).toEqual(['child:1', 'parent:1', 'parent:2']);
        expect(await active(SLOT_HOLDER)).toEqual([]);
        expect(await parked(SLOT_HOLDER)).toEqual([]);
      });
    });
  });

  describe('parked runs', () => {
    it('wakes the next parked run when the run woken for a freed slot was canceled before it started', async () => {
      const wf = engine.registry.define('one-at-a-time', { maxConcurrency: 1 }, () => 1);
      await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
      const [a, b, c] = [await engine.client.start(wf, {}), await engine.client.start(wf, {}), await engine.client.start(wf, {})];
      const { scripts } = engine.client;
      // No worker: claims are made by hand, so every step is deterministic.
      expect((await scripts.claim('default', 'w:1', Date.now(), 60_000))?.runId).toBe(a.id);
      expect(await scripts.claim('default', 'w:2', Date.now(), 60_000)).toBeNull(); // b and c are parked
      expect(await engine.redis.lrange(`{${engine.prefix}}:wf:one-at-a-time:parked`, 0, -1)).toEqual([b.id, c.id]);
      await engine.client.cancelRun(a.id); // frees the slot: b goes back to the queue
      await engine.client.cancelRun(b.id); // ... and is canceled before anyone claims it
      expect((await scripts.claim('default', 'w:3', Date.now(), 60_000))?.runId).toBe(c.id);
    });
  });

  describe('debounce', () => {
    it('collapses starts with the same key into one run with the latest input', async () => {
      const calls: unknown[] = [];
      const wf = engine.registry.define(
        'digest',
        { maxConcurrency: Infinity, debounce: { period: '200ms', key: (input: { userId: string }) => input.userId } },
        ({ input }: { input: { userId: string; n: number } }) => {
          calls.push(input);
          return input;
        },
      );
      await engine.worker();
      const a = await engine.client.start(wf, { userId: 'u1', n: 1 });
      const b = await engine.client.start(wf, { userId: 'u1', n: 2 });
      const lastStart = Date.now();
      const c = await engine.client.start(wf, { userId: 'u1', n: 3 });
      const other = await engine.client.start(wf, { userId: 'u2', n: 1 });

      expect([b.id, c.id]).toEqual([a.id, a.id]);
      expect(other.id).not.toBe(a.id);
      expect(await a.getState()).toMatchObject({ status: 'scheduled', input: { userId: 'u1', n: 3 } });

      await expect(a.result({ timeoutMs: 5_000 })).resolves.toEqual({ userId: 'u1', n: 3 });
      await expect(other.result({ timeoutMs: 5_000 })).resolves.toEqual({ userId: 'u2', n: 1 });
      expect(calls).toHaveLength(2);
      expect(calls).toEqual(
        expect.arrayContaining([
          { userId: 'u1', n: 3 },
          { userId: 'u2', n: 1 },
        ]),
      );
      const run = (await a.getState())!;
      expect(run).toMatchObject({ status: 'succeeded', attempt: 1, input: { userId: 'u1', n: 3 } });
      // Started after a quiet period that began with the last start.
      expect(run.startedAt! - lastStart).toBeGreaterThanOrEqual(200);
      expect((await engine.client.listRuns({ workflow: 'digest' })).map((r) => r.id).sort()).toEqual([a.id, other.id].sort());
    });

    it('starts no later than first start + timeout while starts keep coming, then collapses later starts into a new run', async () => {
      const calls: number[] = [];
      const wf = engine.registry.define(
        'digest-timeout',
        { maxConcurrency: Infinity, debounce: { period: '300ms', timeout: '500ms', key: (input: { userId: string }) => input.userId } },
        ({ input }: { input: { userId: string; n: number } }) => {
          calls.push(input.n);
          return input.n;
        },
      );
      await engine.worker();
      const starts: Array<{ n: number; before: number; after: number; id: string }> = [];
      for (let n = 0; n < 10; n++) {
        const before = Date.now();
        const handle = await engine.client.start(wf, { userId: 'u1', n });
        starts.push({ n, before, after: Date.now(), id: handle.id });
        if (n < 9) await sleep(100);
      }
      const firstId = starts[0].id;
      const first = engine.client.handle<number>(firstId);
      const lastOfFirst = starts.filter((s) => s.id === firstId).at(-1)!.n;
      await expect(first.result({ timeoutMs: 5_000 })).resolves.toBe(lastOfFirst);
      const one = (await first.getState())!;
      expect(one.availableAt).toBe(one.createdAt + 500);
      expect(one.startedAt! - one.createdAt).toBeGreaterThanOrEqual(500);
      expect(one.startedAt! - one.createdAt).toBeLessThanOrEqual(500 + 300);

      // Starts made while the first run was still pending joined it; starts after it started did not.
      for (const s of starts.filter((x) => x.after < one.availableAt)) expect(s.id).toBe(firstId);
      const later = starts.filter((x) => x.before > one.startedAt!);
      expect(later.length).toBeGreaterThan(0);
      const secondId = later[0].id;
      expect(secondId).not.toBe(firstId);
      for (const s of later) expect(s.id).toBe(secondId);
      expect(new Set(starts.map((s) => s.id))).toEqual(new Set([firstId, secondId]));

      const second = engine.client.handle<number>(secondId);
      await expect(second.result({ timeoutMs: 5_000 })).resolves.toBe(9);
      const two = (await second.getState())!;
      expect(two.startedAt! - two.createdAt).toBeLessThanOrEqual(500 + 300);
      expect(calls).toEqual([lastOfFirst, 9]);
      expect([one.attempt, two.attempt]).toEqual([1, 1]);
    });
  });

  describe('debounce of a run already under way', () => {
    it('starts a new run instead of changing the input of a run that started and now waits', async () => {
      const seen: string[] = [];
      const wf = engine.registry.define(
        'debounced-wait',
        { maxConcurrency: Infinity, debounce: { period: '50ms', key: 'k' } },
        async ({ input, step }: WorkflowContext<{ v: string }>) => {
          await step.run('first', () => seen.push(`first:${input.v}`));
          await step.sleep('pause', '300ms');
          await step.run('second', () => seen.push(`second:${input.v}`));
          return input.v;
        },
      );
      await engine.worker();
      const first = await engine.client.start(wf, { v: 'v1' });
      await eventually(async () => {
        const run = await first.getState();
        return run?.status === 'scheduled' && run.attempt === 1;
      });
      const second = await engine.client.start(wf, { v: 'v2' });
      expect(second.id).not.toBe(first.id);
      await expect(first.result({ timeoutMs: 5000 })).resolves.toBe('v1');
      await expect(second.result({ timeoutMs: 5000 })).resolves.toBe('v2');
      expect(seen.filter((s) => s.endsWith('v1'))).toEqual(['first:v1', 'second:v1']);
    });
  });

  describe('throttle', () => {
    it('reschedules runs over the window, keeping their attempt', async () => {
      const wf = engine.registry.define(
        'throttled',
        { maxConcurrency: Infinity, throttle: { limit: 2, period: '500ms' } },
        ({ input }: { input: { n: number } }) => input.n,
      );
      await engine.worker({ concurrency: 4 });
      const handles: RunHandle<number>[] = [];
      for (let n = 0; n < 4; n++) handles.push(await engine.client.start(wf, { n }));

      await eventually(async () => (await statuses(handles.slice(2))).every((s) => s === 'scheduled'));
      const rescheduled = await Promise.all(handles.slice(2).map((h) => h.getState()));
      await Promise.all(handles.slice(0, 2).map((h) => h.result({ timeoutMs: 5_000 })));
      const early = await Promise.all(handles.slice(0, 2).map((h) => h.getState()));
      const firstStart = Math.min(...early.map((s) => s!.startedAt!));
      // The first two started at once and were never rescheduled.
      for (const s of early) expect(s!.availableAt).toBe(s!.createdAt);
      // The other two wait for the window: until the oldest start leaves it.
      for (const s of rescheduled) expect(s).toMatchObject({ status: 'scheduled', attempt: 0, availableAt: firstStart + 500 });

      expect(await Promise.all(handles.map((h) => h.result({ timeoutMs: 5_000 })))).toEqual([0, 1, 2, 3]);
      const done = await Promise.all(handles.map((h) => h.getState()));
      for (const s of done.slice(2)) expect(s!.startedAt! - firstStart).toBeGreaterThanOrEqual(500);
      expect(done.map((s) => [s!.status, s!.attempt])).toEqual(handles.map(() => ['succeeded', 1]));
    });
  });

  describe('rateLimit', () => {
    it('fails a run over the limit before its handler with RateLimitExceededError; other keys are not limited', async () => {
      const calls: string[] = [];
      const wf = engine.registry.define(
        'rate-limited',
        { maxConcurrency: Infinity, rateLimit: { limit: 1, period: '1m', key: (input: { k: string }) => input.k } },
        ({ input }: { input: { k: string } }) => {
          calls.push(input.k);
          return input.k;
        },
      );
      await engine.worker();
      const first = await engine.client.start(wf, { k: 'a' });
      await expect(first.result({ timeoutMs: 5_000 })).resolves.toBe('a');

      const limited = await engine.client.start(wf, { k: 'a' });
      const error = await limited.result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RateLimitExceededError);
      const message =
        `Run "${limited.id}" of workflow "rate-limited" exceeded its rate limit of 1 runs per 60000 ms for key "rate-limited|a". ` +
        'Start it again later, or raise rateLimit.limit.';
      expect(error).toMatchObject({ name: 'RateLimitExceededError', message });
      const state = (await limited.getState())!;
      expect(state).toMatchObject({ status: 'failed', attempt: 0, error: { name: 'RateLimitExceededError', message } });
      expect(state.startedAt).toBeUndefined();

      const otherKey = await engine.client.start(wf, { k: 'b' });
      await expect(otherKey.result({ timeoutMs: 5_000 })).resolves.toBe('b');
      expect(calls).toEqual(['a', 'b']);
    });

    it("does not count a run's own start against it when it resumes after step.waitFor", async () => {
      let resumed = 0;
      const wf = engine.registry.define('rate-limited-wait', { rateLimit: { limit: 1, period: '1m' } }, async ({ step }) => {
        await step.sleep('pause', 50);
        resumed++;
        return 'done';
      });
      await engine.worker();
      const handle = await engine.client.start(wf, {});
      // A durable wait is part of one run (same attempt): resuming it is not a new start of the workflow.
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('done');
      expect(resumed).toBe(1);
      expect(await handle.getState()).toMatchObject({ status: 'succeeded', attempt: 1 });
    });

    it("hands a rate-limited child's RateLimitExceededError to the parent waiting on it", async () => {
      const child = engine.registry.define('rl-child', { maxConcurrency: Infinity, rateLimit: { limit: 1, period: '1m' } }, () => 'child ok');
      const parent = engine.registry.define('rl-parent', {}, async ({ step }) => {
        const one = await step.runWorkflow('first', child, {});
        try {
          await step.runWorkflow('second', child, {});
          return [one, 'second ran'];
        } catch (error) {
          return [one, (error as Error).name];
        }
      });
      await engine.worker();
      const handle = await engine.client.start(parent, {});
      // Correct behaviour takes ~100 ms; a parent that is never told hangs until this timeout.
      await expect(handle.result({ timeoutMs: 3_000 })).resolves.toEqual(['child ok', 'RateLimitExceededError']);
      expect(await engine.client.getRun(`${handle.id}.second`)).toMatchObject({ status: 'failed', error: { name: 'RateLimitExceededError' } });
    });
  });

  describe('mutex', () => {
    type MutexInput = { t: string; label: string };
    type Behaviour = (ctx: WorkflowContext<MutexInput>) => Promise<unknown>;

    /**
     * Two workflows on different queues sharing `tenant:<t>` mutexes. Each records its starts and
     * ends in `log` and how many handlers of one tenant are inside at once.
     */
    function defineMutexPair(behaviours: { a: Behaviour; b: Behaviour }, options: { a?: object } = {}) {
      const log: string[] = [];
      const inside = new Map<string, number>();
      const peak = new Map<string, number>();
      let peakAll = 0;
      let all = 0;
      const define = (name: string, queue: string, behaviour: Behaviour, extra: object = {}) =>
        engine.registry.define(name, { queue, maxConcurrency: Infinity, mutex: (input: MutexInput) => `tenant:${input.t}`, ...extra }, async (ctx) => {
          const { t, label } = ctx.input;
          inside.set(t, (inside.get(t) ?? 0) + 1);
          peak.set(t, Math.max(peak.get(t) ?? 0, inside.get(t)!));
          peakAll = Math.max(peakAll, ++all);
          log.push(`${label}:start:${ctx.run.attempt}`);
          try {
            return await behaviour(ctx as WorkflowContext<MutexInput>);
          } finally {
            log.push(`${label}:end`);
            inside.set(t, inside.get(t)! - 1);
            all--;
          }
        });
      const a = define('mutex-a', 'qa', behaviours.a, options.a);
      const b = define('mutex-b', 'qb', behaviours.b);
      return {
        a,
        b,
        log,
        peak,
        get peakAll() {
          return peakAll;
        },
      };
    }

    /** Gates by run label: `started(label)` resolves when the handler began, `release(label)` lets it go on. */
    function gates() {
      const started = new Map<string, ReturnType<typeof deferred<void>>>();
      const released = new Map<string, ReturnType<typeof deferred<void>>>();
      const get = (map: typeof started, label: string) => {
        if (!map.has(label)) map.set(label, deferred());
        return map.get(label)!;
      };
      return {
        started: (label: string) => get(started, label).promise,
        release: (label: string) => get(released, label).resolve(),
        hold: async (label: string) => {
          get(started, label).resolve();
          await get(released, label).promise;
        },
      };
    }

    it('never overlaps runs of one tenant across workflows and queues; other tenants overlap; released on success', async () => {
      const g = gates();
      const hold: Behaviour = async ({ input }) => {
        await g.hold(input.label);
        return input.label;
      };
      const pair = defineMutexPair({ a: hold, b: hold });
      await engine.worker({ concurrency: 4 });

      const a1 = await engine.client.start(pair.a, { t: '1', label: 'a1' });
      await g.started('a1');
      const b1 = await engine.client.start(pair.b, { t: '1', label: 'b1' });
      const b2 = await engine.client.start(pair.b, { t: '2', label: 'b2' });
      await g.started('b2'); // tenant 2 runs while tenant 1 is held
      await eventually(async () => (await mutexParked('tenant:1')).join() === b1.id);
      expect(await b1.getState()).toMatchObject({ status: 'queued', attempt: 0 });
      expect(await mutexHolder('tenant:1')).toBe(a1.id);
      expect(await mutexHolder('tenant:2')).toBe(b2.id);
      expect(pair.peakAll).toBe(2);

      g.release('a1');
      await g.started('b1');
      expect(await a1.result({ timeoutMs: 5_000 })).toBe('a1');
      expect(await mutexHolder('tenant:1')).toBe(b1.id);
      g.release('b1');
      g.release('b2');
      expect(await Promise.all([b1, b2].map((h) => h.result({ timeoutMs: 5_000 })))).toEqual(['b1', 'b2']);

      expect(pair.peak.get('1')).toBe(1);
      expect(pair.peak.get('2')).toBe(1);
      const tenantOne = pair.log.filter((e) => e.startsWith('a1') || e.startsWith('b1'));
      expect(tenantOne).toEqual(['a1:start:1', 'a1:end', 'b1:start:1', 'b1:end']);
      expect(await mutexHolder('tenant:1')).toBeNull();
      expect(await mutexHolder('tenant:2')).toBeNull();
      expect(await mutexParked('tenant:1')).toEqual([]);
    });

    it('is released when the holder fails', async () => {
      const g = gates();
      const pair = defineMutexPair({
        a: async ({ input }) => {
          await g.hold(input.label);
          throw new NonRetriableError('holder failed');
        },
        b: async ({ input }) => input.label,
      });
      await engine.worker({ concurrency: 4 });
      const a1 = await engine.client.start(pair.a, { t: '1', label: 'a1' });
      await g.started('a1');
      const b1 = await engine.client.start(pair.b, { t: '1', label: 'b1' });
      await eventually(async () => (await mutexParked('tenant:1')).join() === b1.id);

      g.release('a1');
      await expect(a1.result({ timeoutMs: 5_000 })).rejects.toThrow(NonRetriableError);
      await expect(b1.result({ timeoutMs: 5_000 })).resolves.toBe('b1');
      expect(pair.log).toEqual(['a1:start:1', 'a1:end', 'b1:start:1', 'b1:end']);
      expect(pair.peak.get('1')).toBe(1);
      expect(await mutexHolder('tenant:1')).toBeNull();
    });

    it('is released while the holder waits for its retry', async () => {
      const g = gates();
      const pair = defineMutexPair(
        {
          a: async ({ input, run }) => {
            if (run.attempt === 1) {
              await g.hold('a1-attempt-1');
              throw new Error('try again');
            }
            return `${input.label} attempt ${run.attempt}`;
          },
          b: async ({ input }) => {
            await g.hold(input.label);
            return input.label;
          },
        },
        { a: { retries: { maxAttempts: 2, delay: 50 } } },
      );
      await engine.worker({ concurrency: 4 });
      const a1 = await engine.client.start(pair.a, { t: '1', label: 'a1' });
      await g.started('a1-attempt-1');
      const b1 = await engine.client.start(pair.b, { t: '1', label: 'b1' });
      await eventually(async () => (await mutexParked('tenant:1')).join() === b1.id);

      g.release('a1-attempt-1');
      await g.started('b1'); // the other workflow's run got the mutex between a1's attempts
      expect(await mutexHolder('tenant:1')).toBe(b1.id);
      // a1's retry came due while b1 holds the mutex: it waits parked, its next attempt not started.
      await eventually(async () => (await mutexParked('tenant:1')).join() === a1.id);
      expect(await a1.getState()).toMatchObject({ status: 'queued', attempt: 1, error: { message: 'try again' } });

      g.release('b1');
      await expect(b1.result({ timeoutMs: 5_000 })).resolves.toBe('b1');
      await expect(a1.result({ timeoutMs: 5_000 })).resolves.toBe('a1 attempt 2');
      expect(pair.log).toEqual(['a1:start:1', 'a1:end', 'b1:start:1', 'b1:end', 'a1:start:2', 'a1:end']);
      expect(pair.peak.get('1')).toBe(1);
      expect(await a1.getState()).toMatchObject({ status: 'succeeded', attempt: 2 });
      expect(await mutexHolder('tenant:1')).toBeNull();
    });

    it('is released when the holder is canceled', async () => {
      const g = gates();
      let holderSignal: AbortSignal | undefined;
      const pair = defineMutexPair({
        a: async ({ input, signal }) => {
          holderSignal = signal;
          await Promise.race([g.hold(input.label), new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))]);
          return input.label;
        },
        b: async ({ input }) => {
          await g.hold(input.label);
          return input.label;
        },
      });
      await engine.worker({ concurrency: 4 });
      const a1 = await engine.client.start(pair.a, { t: '1', label: 'a1' });
      await g.started('a1');
      const b1 = await engine.client.start(pair.b, { t: '1', label: 'b1' });
      await eventually(async () => (await mutexParked('tenant:1')).join() === b1.id);

      expect(await engine.client.cancelRun(a1.id, { reason: 'tenant moved' })).toBe(true);
      await g.started('b1');
      expect(await mutexHolder('tenant:1')).toBe(b1.id);
      expect(await a1.getState()).toMatchObject({ status: 'canceled', cancelReason: 'tenant moved' });
      await eventually(() => holderSignal?.aborted === true);

      g.release('b1');
      await expect(b1.result({ timeoutMs: 5_000 })).resolves.toBe('b1');
      expect(await mutexHolder('tenant:1')).toBeNull();
      expect(await mutexParked('tenant:1')).toEqual([]);
    });

    it('is released while the holder is in step.waitFor, and taken again when it resumes', async () => {
      const g = gates();
      const pair = defineMutexPair({
        a: async ({ input, step }) => {
          await step.run('before', () => g.hold('a1-before'));
          await step.sleep('pause', 200);
          return step.run('after', () => input.label);
        },
        b: async ({ input }) => {
          await g.hold(input.label);
          return input.label;
        },
      });
      await engine.worker({ concurrency: 4 });
      const a1 = await engine.client.start(pair.a, { t: '1', label: 'a1' });
      await g.started('a1-before');
      const b1 = await engine.client.start(pair.b, { t: '1', label: 'b1' });
      await eventually(async () => (await mutexParked('tenant:1')).join() === b1.id);

      g.release('a1-before');
      await g.started('b1'); // taken while a1 waits
      // A waiting run keeps its attempt number (it is not a new attempt).
      expect(await a1.getState()).toMatchObject({ status: 'scheduled', attempt: 1 });
      expect(await mutexHolder('tenant:1')).toBe(b1.id);
      // a1 wakes while b1 still holds the mutex: it waits parked.
      await eventually(async () => (await mutexParked('tenant:1')).join() === a1.id);
      expect(await a1.getState()).toMatchObject({ status: 'queued', attempt: 1 });

      g.release('b1');
      await expect(b1.result({ timeoutMs: 5_000 })).resolves.toBe('b1');
      await expect(a1.result({ timeoutMs: 5_000 })).resolves.toBe('a1');
      expect(pair.log).toEqual(['a1:start:1', 'a1:end', 'b1:start:1', 'b1:end', 'a1:start:1', 'a1:end']);
      expect(pair.peak.get('1')).toBe(1);
      expect(await a1.getState()).toMatchObject({ status: 'succeeded', attempt: 1 });
      expect(await mutexHolder('tenant:1')).toBeNull();
    });
  });

  describe('retention', () => {
    const RETENTION_DAYS = 300 / 86_400_000; // 300 ms

    it('deletes ended runs with their steps and index entries; queued and scheduled runs stay', async () => {
      const cancelStarted = deferred();
      const ok = engine.registry.define('keep-ok', { maxConcurrency: Infinity }, async ({ step }) => step.run('one', () => 1));
      const bad = engine.registry.define('keep-bad', { maxConcurrency: Infinity }, async ({ step }) => {
        await step.run('one', () => 1);
        throw new NonRetriableError('no');
      });
      const cancelable = engine.registry.define('keep-cancel', { maxConcurrency: Infinity }, async ({ step, signal }) => {
        await step.run('one', () => 1);
        cancelStarted.resolve();
        await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
      });
      const idle = engine.registry.define('keep-idle', { queue: 'unserved', maxConcurrency: Infinity }, () => 'never');

      // Live runs first, so that they are older than every ended run.
      const queued = await engine.client.start(idle, { n: 1 });
      const scheduled = await engine.client.start(ok, {}, { runAt: Date.now() + 3_600_000 });
      await engine.worker({ queues: ['default'], retentionDays: RETENTION_DAYS, runtime: { cleanupIntervalMs: 100 } });

      const succeeded = await engine.client.start(ok, {});
      const failed = await engine.client.start(bad, {});
      const canceled = await engine.client.start(cancelable, {});
      const stepNames = async (h: RunHandle<unknown>) => (await engine.client.getRunSteps(h.id)).map((s) => s.name);
      // Each ended run had a stored step (checked at once: retention is 300 ms).
      await expect(succeeded.result({ timeoutMs: 5_000 })).resolves.toBe(1);
      expect(await stepNames(succeeded)).toEqual(['one']);
      await expect(failed.result({ timeoutMs: 5_000 })).rejects.toThrow('no');
      expect(await stepNames(failed)).toEqual(['one']);
      await cancelStarted.promise;
      expect(await engine.client.cancelRun(canceled.id)).toBe(true);
      expect(await stepNames(canceled)).toEqual(['one']);
      const ended = [succeeded, failed, canceled];

      await eventually(async () => (await Promise.all(ended.map((h) => h.getState()))).every((s) => s === null), 5_000);
      for (const h of ended) {
        expect(await engine.redis.exists(engine.client.keys.run(h.id))).toBe(0);
        expect(await engine.client.getRunSteps(h.id)).toEqual([]);
      }
      for (const [h, wf, status] of [
        [succeeded, 'keep-ok', 'succeeded'],
        [failed, 'keep-bad', 'failed'],
        [canceled, 'keep-cancel', 'canceled'],
      ] as const) {
        expect(await engine.redis.zscore(engine.client.keys.workflowStatusRuns(status, wf), h.id)).toBeNull();
      }
      for (const status of ['succeeded', 'failed', 'canceled'] as const) {
        expect(await engine.redis.zcard(engine.client.keys.status(status))).toBe(0);
        expect(await engine.client.listRuns({ status })).toEqual([]);
      }
      expect(await engine.client.listRuns({ workflow: 'keep-bad' })).toEqual([]);
      expect(await engine.client.listRuns({ workflow: 'keep-cancel' })).toEqual([]);

      // The passes that deleted them saw the live runs too (those are older): untouched.
      expect((await engine.client.listRuns({ workflow: 'keep-ok' })).map((r) => [r.id, r.status])).toEqual([[scheduled.id, 'scheduled']]);
      expect((await engine.client.listRuns({ workflow: 'keep-idle' })).map((r) => [r.id, r.status])).toEqual([[queued.id, 'queued']]);
      expect(await engine.redis.zscore(engine.client.keys.scheduled('default'), scheduled.id)).not.toBeNull();
      expect(await engine.redis.lrange(engine.client.keys.ready('unserved'), 0, -1)).toEqual([queued.id]);
      expect((await engine.client.listRuns()).map((r) => r.id).sort()).toEqual([queued.id, scheduled.id].sort());
    });

    it('forgets the idempotency key of a deleted run: the same key starts a new run', async () => {
      const wf = engine.registry.define('idem-retained', { maxConcurrency: Infinity }, ({ input }: { input: { n: number } }) => input.n);
      await engine.worker({ retentionDays: RETENTION_DAYS, runtime: { cleanupIntervalMs: 100 } });
      const first = await engine.client.start(wf, { n: 1 }, { idempotencyKey: 'order-1' });
      await expect(first.result({ timeoutMs: 5_000 })).resolves.toBe(1);
      await eventually(async () => (await first.getState()) === null);

      const again = await engine.client.start(wf, { n: 1 }, { idempotencyKey: 'order-1' });
      // A handle to the deleted run would be useless: its result() throws CorruptRunDataError.
      expect(again.id).not.toBe(first.id);
      await expect(again.result({ timeoutMs: 5_000 })).resolves.toBe(1);
    });

    it('deletes more than one batch (500) of ended runs, in bounded batches', async () => {
      const noop = engine.registry.define('noop', { maxConcurrency: Infinity }, () => null);
      await engine.worker({ concurrency: 50 }); // default retention: keeps them
      const ids: string[] = [];
      for (let i = 0; i < 600; i += 100) {
        const batch = await Promise.all(Array.from({ length: 100 }, () => engine.client.start(noop, {})));
        ids.push(...batch.map((h) => h.id));
      }
      await eventually(async () => (await engine.redis.zcard(engine.client.keys.status('succeeded'))) === 600, 10_000);
      expect(await engine.client.countRuns({ workflow: 'noop' })).toBe(600);
      // Wait until every run is past the 300 ms retention, so that the first cleanup finds all 600.
      const [, lastFinish] = await engine.redis.zrevrange(engine.client.keys.status('succeeded'), 0, 0, 'WITHSCORES');
      await sleep(Math.max(0, Number(lastFinish) + 350 - Date.now()));

      const deletedPerCall: number[] = [];
      const cleanup = engine.client.scripts.cleanup.bind(engine.client.scripts);
      const spy = jest.spyOn(engine.client.scripts, 'cleanup').mockImplementation(async (cutoff, batch) => {
        const deleted = await cleanup(cutoff, batch);
        deletedPerCall.push(deleted);
        return deleted;
      });
      try {
        await engine.worker({ concurrency: 1, retentionDays: RETENTION_DAYS, runtime: { cleanupIntervalMs: 100 } });
        // The second call's reply may arrive just after another connection sees the index empty.
        await eventually(async () => deletedPerCall.length >= 2 && (await engine.client.countRuns({ workflow: 'noop' })) === 0, 5_000);
        expect(deletedPerCall.slice(0, 2)).toEqual([500, 100]);
        expect(spy.mock.calls[0][1]).toBe(500);
      } finally {
        spy.mockRestore();
      }
      expect(await engine.redis.zcard(engine.client.keys.status('succeeded'))).toBe(0);
      const exists = await Promise.all(
        ids
          .slice(0, 50)
          .concat(ids.slice(-50))
          .map((id) => engine.redis.exists(engine.client.keys.run(id))),
      );
      expect(exists.every((e) => e === 0)).toBe(true);
      expect(await engine.client.listRuns({ workflow: 'noop' })).toEqual([]);
    });
  });
});
