import { join } from 'node:path';

import { InvalidCronError, WorkflowRegistry, type RunState } from '../../lib';
import { nextCronTick } from '../../lib/core/definition/cron';
import { defineCronWorkflow, execKey, readyKey, TICKER, TICKER_CRON_ID } from '../fixtures/cron-worker';
import { deferred, eventually, TestEngine } from '../support/engine';
import { killWorkerProcess, spawnWorkerProcess, whileAlive, type WorkerProcess } from '../support/worker-process';

const FIXTURE = join(__dirname, '..', 'fixtures', 'cron-worker.ts');
/** A child compiles the engine with SWC on start-up, so its worker may take a few seconds to start. */
const CHILD_PATIENCE_MS = 15_000;
const EVERY_SECOND = '*/1 * * * * *';
/** The id of a client-emitted event: "ev" + a time-ordered run id. */
const EVENT_ID = /^ev[0-9a-z]+$/;

/** `cron.<cronId>.<tickMs>` → tickMs, or NaN when the id has another shape. */
function tickOf(runId: string, cronId: string): number {
  const head = `cron.${cronId}.`;
  return runId.startsWith(head) && /^\d+$/.test(runId.slice(head.length)) ? Number(runId.slice(head.length)) : NaN;
}

describe('events and cron', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const runIdsOf = async (workflow: string) => (await engine.client.listRuns({ workflow, limit: 1000 })).map((r) => r.id).sort();
  const subscribers = async (event: string) => (await engine.redis.smembers(engine.client.keys.eventSubscribers(event))).sort();

  describe('events', () => {
    it('starts one run per subscribed workflow, with the payload as input and ids "<eventId>.<workflow>"', async () => {
      const inputs: Record<string, unknown[]> = { billing: [], shipping: [], audit: [] };
      for (const name of ['billing', 'shipping'] as const) {
        engine.registry.define(name, { event: [{ name: 'order.created' }] }, ({ input, run }) => {
          inputs[name].push(input);
          return { handledBy: name, runId: run.id };
        });
      }
      // Defined, but subscribed to another event only.
      engine.registry.define('audit', { event: [{ name: 'order.shipped' }] }, ({ input }) => {
        inputs.audit.push(input);
        return null;
      });
      await engine.worker();
      expect(await subscribers('order.created')).toEqual(['billing', 'shipping']);

      const payload = { orderId: 42, items: ['book'] };
      const ids = await engine.client.emitEvent('order.created', payload);

      expect(ids).toHaveLength(2);
      const eventId = ids[0].slice(0, ids[0].indexOf('.'));
      expect(eventId).toMatch(EVENT_ID);
      expect(ids).toEqual([`${eventId}.billing`, `${eventId}.shipping`]);
      await expect(engine.client.handle(ids[0]).result({ timeoutMs: 5_000 })).resolves.toEqual({ handledBy: 'billing', runId: ids[0] });
      await expect(engine.client.handle(ids[1]).result({ timeoutMs: 5_000 })).resolves.toEqual({ handledBy: 'shipping', runId: ids[1] });
      for (const [i, workflow] of ['billing', 'shipping'].entries()) {
        expect(await engine.client.getRun(ids[i])).toMatchObject({ workflow, status: 'succeeded', input: payload, attempt: 1 });
        expect(await runIdsOf(workflow)).toEqual([ids[i]]);
      }
      expect(inputs).toEqual({ billing: [payload], shipping: [payload], audit: [] });
      expect(await runIdsOf('audit')).toEqual([]);
    });

    it('fans out at emitAt, not before: emitEvent({ emitAt }) and scheduleEvent both return []', async () => {
      const ran = { now: deferred<string>(), later: deferred<string>() };
      engine.registry.define('on-emit', { event: [{ name: 'reminder.emit' }] }, ({ run }) => ran.now.resolve(run.id));
      engine.registry.define('on-schedule', { event: [{ name: 'reminder.schedule' }] }, ({ run }) => ran.later.resolve(run.id));
      await engine.worker();

      const cases = [
        { workflow: 'on-emit', done: ran.now.promise, emit: (at: number) => engine.client.emitEvent('reminder.emit', { n: 1 }, { emitAt: at }) },
        {
          workflow: 'on-schedule',
          done: ran.later.promise,
          emit: (at: number) => engine.client.scheduleEvent('reminder.schedule', { n: 2 }, { emitAt: new Date(at) }),
        },
      ];
      for (const [i, c] of cases.entries()) {
        const emitAt = Date.now() + 400;
        await expect(c.emit(emitAt)).resolves.toEqual([]);
        // Stored for later: nothing exists yet.
        expect(await runIdsOf(c.workflow)).toEqual([]);
        expect(await engine.redis.zcard(engine.client.keys.eventsDue())).toBe(1);

        const runId = await c.done;
        const eventId = runId.slice(0, -`.${c.workflow}`.length);
        expect(runId).toBe(`${eventId}.${c.workflow}`);
        expect(eventId).toMatch(EVENT_ID);
        const run = (await engine.client.getRun(runId))!;
        expect(run).toMatchObject({ workflow: c.workflow, input: { n: i + 1 } });
        expect(run.createdAt).toBeGreaterThanOrEqual(emitAt);
        expect(run.startedAt).toBeGreaterThanOrEqual(emitAt);
        expect(await runIdsOf(c.workflow)).toEqual([runId]);
        // The due event and its data are gone once fanned out.
        expect(await engine.redis.zcard(engine.client.keys.eventsDue())).toBe(0);
        expect(await engine.redis.exists(`${engine.client.keys.base}evdata:${eventId}`)).toBe(0);
      }
    });

    it('returns the same runs for a repeated emit with the same idempotencyKey, and creates no others', async () => {
      const handled: string[] = [];
      for (const name of ['mailer', 'crm']) {
        engine.registry.define(name, { event: [{ name: 'user.signed-up' }] }, ({ run }) => void handled.push(run.id));
      }
      await engine.worker();

      const first = await engine.client.emitEvent('user.signed-up', { userId: 'u1' }, { idempotencyKey: 'signup-u1' });
      const second = await engine.client.emitEvent('user.signed-up', { userId: 'u1' }, { idempotencyKey: 'signup-u1' });
      expect(first).toHaveLength(2);
      expect(second).toEqual(first);
      const eventId = first[0].slice(0, first[0].indexOf('.'));
      expect(first).toEqual([`${eventId}.crm`, `${eventId}.mailer`]);

      for (const id of first) await engine.client.handle(id).result({ timeoutMs: 5_000 });
      // Emitting again after the runs ended still returns them and starts nothing.
      expect(await engine.client.emitEvent('user.signed-up', { userId: 'u1' }, { idempotencyKey: 'signup-u1' })).toEqual(first);
      expect(await runIdsOf('crm')).toEqual([first[0]]);
      expect(await runIdsOf('mailer')).toEqual([first[1]]);
      expect(handled.sort()).toEqual([...first].sort());
      expect(await engine.client.listRuns({ limit: 100 })).toHaveLength(2);
    });

    it('drops the subscription of a workflow deleted from the registry when the event is next emitted', async () => {
      const noop = () => null;
      const before = new WorkflowRegistry();
      before.define('gone', { event: [{ name: 'item.added' }] }, noop);
      before.define('kept', { event: [{ name: 'item.added' }] }, noop);
      await engine.client.syncRegistry(before, { owner: 'a' });
      expect(await subscribers('item.added')).toEqual(['gone', 'kept']);

      const after = new WorkflowRegistry();
      after.define('kept', { event: [{ name: 'item.added' }] }, noop);
      await expect(engine.client.syncRegistry(after, { owner: 'a' })).resolves.toEqual(['gone']);
      expect(await engine.client.getWorkflowMeta('gone')).toBeNull();

      const ids = await engine.client.emitEvent('item.added', { sku: 'x' });
      expect(ids).toHaveLength(1);
      expect(ids[0]).toMatch(/^ev[0-9a-z]+\.kept$/);
      expect(await runIdsOf('gone')).toEqual([]);
      expect(await runIdsOf('kept')).toEqual(ids);
      expect(await subscribers('item.added')).toEqual(['kept']);
    });

    it('does not start a run for an event that a pruned and re-registered workflow no longer subscribes to', async () => {
      const noop = () => null;
      const first = new WorkflowRegistry();
      first.define('reborn', { event: [{ name: 'item.removed' }] }, noop);
      await engine.client.syncRegistry(first, { owner: 'a' });
      await expect(engine.client.syncRegistry(new WorkflowRegistry(), { owner: 'a' })).resolves.toEqual(['reborn']);

      // The workflow comes back (a later deploy) without the event trigger, before any emit.
      const again = new WorkflowRegistry();
      again.define('reborn', {}, noop);
      await engine.client.syncRegistry(again, { owner: 'a' });

      expect(await engine.client.emitEvent('item.removed', { sku: 'y' })).toEqual([]);
      expect(await runIdsOf('reborn')).toEqual([]);
      expect(await subscribers('item.removed')).toEqual([]);
    });

    it('step.emitEvent returns the subscriber run ids and does not emit again when the parent is retried', async () => {
      const subscriberRuns: Record<string, string[]> = { 'sub-a': [], 'sub-b': [] };
      for (const name of ['sub-a', 'sub-b']) {
        engine.registry.define(name, { event: [{ name: 'invoice.paid' }] }, ({ run, input }) => {
          subscriberRuns[name].push(run.id);
          return input;
        });
      }
      const seen: Array<{ attempt: number; ids: string[] }> = [];
      const parent = engine.registry.define('payer', { retries: { maxAttempts: 2, delay: 10 } }, async ({ step, run }) => {
        const ids = await step.emitEvent('notify', 'invoice.paid', { invoice: 9 });
        seen.push({ attempt: run.attempt, ids });
        if (run.attempt === 1) throw new Error('fails after the emit');
        return ids;
      });
      await engine.worker();

      const handle = await engine.client.start(parent, {});
      const expected = [`${handle.id}.notify.sub-a`, `${handle.id}.notify.sub-b`];
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual(expected);
      expect(seen).toEqual([
        { attempt: 1, ids: expected },
        { attempt: 2, ids: expected },
      ]);
      expect(await handle.getState()).toMatchObject({ status: 'succeeded', attempt: 2 });
      const steps = await engine.client.getRunSteps(handle.id);
      expect(steps.map((s) => [s.name, s.status, s.seq, s.attempt, s.output])).toEqual([['notify', 'succeeded', 1, 1, expected]]);

      for (const id of expected) await expect(engine.client.handle(id).result({ timeoutMs: 5_000 })).resolves.toEqual({ invoice: 9 });
      expect(subscriberRuns).toEqual({ 'sub-a': [expected[0]], 'sub-b': [expected[1]] });
      expect(await runIdsOf('sub-a')).toEqual([expected[0]]);
      expect(await runIdsOf('sub-b')).toEqual([expected[1]]);
    });
  });

  describe('cron', () => {
    it('starts runs "cron.<workflow>#0.<tick>" on whole-second ticks with the given input', async () => {
      const two = deferred();
      const runs: Array<{ id: string; input: unknown }> = [];
      engine.registry.define('every-second', { cron: [{ expression: EVERY_SECOND, input: { source: 'cron' }, overlap: 'allow' }] }, ({ run, input }) => {
        runs.push({ id: run.id, input });
        if (runs.length === 2) two.resolve();
        return runs.length;
      });
      expect(JSON.parse((await engine.redis.hget(engine.client.keys.cronDefs(), 'every-second#0')) ?? 'null')).toBeNull();
      const worker = await engine.worker();
      expect(JSON.parse((await engine.redis.hget(engine.client.keys.cronDefs(), 'every-second#0'))!)).toEqual({
        workflow: 'every-second',
        expression: EVERY_SECOND,
        timezone: null,
        input: { source: 'cron' },
        overlap: 'allow',
      });
      await two.promise;
      await worker.stop();

      const ticks = runs.map((r) => tickOf(r.id, 'every-second#0'));
      expect(runs.map((r) => r.id)).toEqual(ticks.map((t) => `cron.every-second#0.${t}`));
      expect(runs.map((r) => r.input)).toEqual([{ source: 'cron' }, { source: 'cron' }]);
      expect(ticks.map((t) => t % 1000)).toEqual([0, 0]);
      expect(ticks[1] - ticks[0]).toBe(1000);
      const stored = (await engine.client.listRuns({ workflow: 'every-second' })).sort((a, b) => a.createdAt - b.createdAt);
      expect(stored.map((r) => [r.id, r.status, r.output, r.input])).toEqual([
        [runs[0].id, 'succeeded', 1, { source: 'cron' }],
        [runs[1].id, 'succeeded', 2, { source: 'cron' }],
      ]);
      for (const [i, r] of stored.entries()) expect(r.createdAt).toBeGreaterThanOrEqual(ticks[i]);
    });

    describe('across worker processes', () => {
      let children: WorkerProcess[] = [];

      afterEach(async () => {
        await Promise.all(children.map((c) => killWorkerProcess(c)));
        children = [];
      });

      function spawnCronWorker(): void {
        // The fixture stops when its stdin closes.
        children.push(spawnWorkerProcess(FIXTURE, { REDFLOW_CRON_PREFIX: engine.prefix }, 'pipe'));
      }

      const whileChildrenRun = (check: () => Promise<boolean>, timeoutMs = CHILD_PATIENCE_MS) => whileAlive(children, 'A cron worker', check, timeoutMs);

      it('creates exactly one run per tick when 3 child workers and 1 in-process worker share the cron', async () => {
        defineCronWorkflow(engine.registry, engine.redis, engine.prefix);
        await engine.worker();
        for (let i = 0; i < 3; i++) spawnCronWorker();
        await whileChildrenRun(async () => (await engine.redis.llen(readyKey(engine.prefix))) === 3);
        const allReady = Date.now();

        // Three ticks fired while all four workers compete for them, and their runs ended.
        const afterReady = (runs: RunState[]) => runs.filter((r) => tickOf(r.id, TICKER_CRON_ID) > allReady);
        await whileChildrenRun(async () => {
          const runs = afterReady(await engine.client.listRuns({ workflow: TICKER, limit: 1000 }));
          return runs.length >= 3 && runs.every((r) => r.status === 'succeeded');
        }, 6_000);

        const runs = await engine.client.listRuns({ workflow: TICKER, limit: 1000 });
        const ticks = runs.map((r) => tickOf(r.id, TICKER_CRON_ID)).sort((a, b) => a - b);
        expect(ticks.every((t) => Number.isInteger(t) && t % 1000 === 0)).toBe(true);
        expect(new Set(ticks).size).toBe(runs.length);
        expect(await engine.client.countRuns({ workflow: TICKER })).toBe(runs.length);
        // While all workers ran, no tick was skipped nor fired twice: consecutive seconds.
        const window = ticks.filter((t) => t > allReady);
        expect(window.length).toBeGreaterThanOrEqual(3);
        expect(window.slice(1).map((t, i) => t - window[i])).toEqual(window.slice(1).map(() => 1000));
        expect(runs.every((r) => JSON.stringify(r.input) === JSON.stringify({ source: 'cron' }))).toBe(true);
        // Each ended run's handler ran once, in one of the processes.
        const ended = runs.filter((r) => r.status === 'succeeded');
        const counts = await engine.redis.mget(...ended.map((r) => execKey(engine.prefix, r.id)));
        expect(counts).toEqual(ended.map(() => '1'));
      });
    });

    it('skips the ticks that come while the workflow is at maxConcurrency', async () => {
      const release = deferred();
      const started = [deferred<string>(), deferred<string>()];
      let calls = 0;
      // overlap 'allow', so that it is maxConcurrency, not the overlap policy, that skips the ticks.
      engine.registry.define('slow-cron', { maxConcurrency: 1, cron: [{ expression: EVERY_SECOND, overlap: 'allow' }] }, async ({ run }) => {
        const n = calls++;
        started[n]?.resolve(run.id);
        if (n === 0) await release.promise;
        return n;
      });
      await engine.worker();
      const firstId = await started[0].promise;
      const first = tickOf(firstId, 'slow-cron#0');
      expect(first % 1000).toBe(0);

      // Ticks first+1 s and first+2 s came and went (the next time is now first+3 s or later).
      await eventually(async () => Number(await engine.redis.zscore(engine.client.keys.cronNext(), 'slow-cron#0')) >= first + 3000, 5_000);
      expect(await runIdsOf('slow-cron')).toEqual([firstId]);
      expect(await engine.client.getRun(firstId)).toMatchObject({ status: 'running', input: null });
      expect(await engine.client.getRun(`cron.slow-cron#0.${first + 1000}`)).toBeNull();
      expect(await engine.client.getRun(`cron.slow-cron#0.${first + 2000}`)).toBeNull();

      release.resolve();
      const secondId = await started[1].promise;
      expect(tickOf(secondId, 'slow-cron#0')).toBeGreaterThanOrEqual(first + 3000);
      await expect(engine.client.handle(firstId).result({ timeoutMs: 2_000 })).resolves.toBe(0);
    });

    it('rejects an invalid cron expression or time zone when the workflow is defined', () => {
      const registry = new WorkflowRegistry();
      const define = (name: string, trigger: { expression: string; timezone?: string }) => () => registry.define(name, { cron: [trigger] }, () => null);

      expect(define('bad-expr', { expression: 'not a cron' })).toThrow(InvalidCronError);
      expect(define('bad-expr', { expression: 'not a cron' })).toThrow(/Cron expression "not a cron" of workflow "bad-expr" is invalid/);
      expect(define('bad-tz', { expression: EVERY_SECOND, timezone: 'Mars/Olympus' })).toThrow(InvalidCronError);
      expect(define('bad-tz', { expression: EVERY_SECOND, timezone: 'Mars/Olympus' })).toThrow(
        `Cron expression "${EVERY_SECOND}" with time zone "Mars/Olympus" of workflow "bad-tz" is invalid`,
      );
      let error: InvalidCronError | undefined;
      try {
        define('bad-tz', { expression: EVERY_SECOND, timezone: 'Mars/Olympus' })();
      } catch (e) {
        error = e as InvalidCronError;
      }
      expect(error).toMatchObject({ name: 'InvalidCronError', workflow: 'bad-tz', expression: EVERY_SECOND, timezone: 'Mars/Olympus' });
      // Nothing was added to the registry.
      expect(registry.list()).toEqual([]);
    });

    it('replaces the next time when the expression changes on re-sync and removes a cron dropped from the workflow', async () => {
      const keys = engine.client.keys;
      const noop = () => null;
      const sync = (expression: string | null) => {
        const registry = new WorkflowRegistry();
        registry.define('yearly', expression ? { cron: [{ id: 'yearly-job', expression, timezone: 'UTC' }] } : {}, noop);
        registry.define('other', { cron: [{ expression: '0 0 1 1 *', timezone: 'UTC' }] }, noop);
        return engine.client.syncRegistry(registry, { owner: 'app' });
      };
      const nextOf = async (id: string) => {
        const score = await engine.redis.zscore(keys.cronNext(), id);
        return score === null ? null : Number(score);
      };
      const defOf = async (id: string) => JSON.parse((await engine.redis.hget(keys.cronDefs(), id)) ?? 'null');
      const expected = (expression: string) => nextCronTick('yearly', { expression, timezone: 'UTC' }, Date.now());

      await sync('0 0 1 1 *');
      expect(await defOf('yearly-job')).toEqual({ workflow: 'yearly', expression: '0 0 1 1 *', timezone: 'UTC', input: null });
      expect(await nextOf('yearly-job')).toBe(expected('0 0 1 1 *'));
      const otherNext = await nextOf('other#0');
      expect(otherNext).toBe(expected('0 0 1 1 *'));

      // Unchanged definition: the next time is kept (marked here to tell it apart from a recomputed one).
      await engine.redis.zadd(keys.cronNext(), 12345, 'yearly-job');
      await sync('0 0 1 1 *');
      expect(await nextOf('yearly-job')).toBe(12345);

      // New expression: the next time is replaced.
      await sync('0 0 1 7 *');
      expect(await defOf('yearly-job')).toEqual({ workflow: 'yearly', expression: '0 0 1 7 *', timezone: 'UTC', input: null });
      expect(await nextOf('yearly-job')).toBe(expected('0 0 1 7 *'));
      expect(new Date((await nextOf('yearly-job'))!).toISOString()).toMatch(/^\d{4}-07-01T00:00:00\.000Z$/);

      // Cron removed from the workflow: gone from both keys; the other workflow's cron is untouched.
      await expect(sync(null)).resolves.toEqual([]);
      expect(await defOf('yearly-job')).toBeNull();
      expect(await nextOf('yearly-job')).toBeNull();
      expect(await engine.redis.hkeys(keys.cronDefs())).toEqual(['other#0']);
      expect(await engine.redis.zrange(keys.cronNext(), '0', '-1')).toEqual(['other#0']);
      expect(await nextOf('other#0')).toBe(otherNext);
      expect(await engine.client.getWorkflowMeta('yearly')).toMatchObject({ owner: 'app' });
    });
  });
});
