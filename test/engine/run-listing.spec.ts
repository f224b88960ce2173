import { CorruptRunDataError, createAdmin, RedisScriptError, type RedflowLogger, type RedisConnection, type RunStatus, type RunSummary } from '../../lib';
import { RUN_STATUSES } from '../../lib/core/definition/run-types';
import type { FinishOutcome } from '../../lib/core/store/redis-scripts';
import { summarizeRun } from '../../lib/core/store/run-record';
import { countScriptCalls, deferred, eventually, TestEngine } from '../support/engine';

/**
 * Listing runs by workflow and status reads the (workflow, status) index `wfstatus:<status>:<workflow>`,
 * which every status move keeps in the same script; runs stored before it existed are indexed by
 * the first worker that starts. Summaries read only what a list row shows.
 */
describe('listing runs by workflow and status', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const STATUSES: RunStatus[] = ['scheduled', 'queued', 'running', 'succeeded', 'failed', 'canceled'];
  const ENDED = new Set<string>(['succeeded', 'failed', 'canceled']);
  const DAY_MS = 86_400_000;
  const LEASE_MS = 60_000;
  const keys = () => engine.client.keys;
  const scripts = () => engine.client.scripts;

  type ByStatus = Partial<Record<RunStatus, string[]>>;

  /** A workflow's (workflow, status) index: status → run ids, sorted; empty statuses left out. */
  async function indexOf(workflow: string): Promise<ByStatus> {
    const out: ByStatus = {};
    for (const status of STATUSES) {
      const ids = await engine.redis.zrange(keys().workflowStatusRuns(status, workflow), 0, '-1');
      if (ids.length) out[status] = ids.sort();
    }
    return out;
  }

  /**
   * The index holds exactly `expected` for each workflow; the workflow is named in `wfnames`; each
   * run's hash has that status and workflow; each entry is scored by creation time for live
   * statuses (running included), by finish time for ended ones; an ended run is also in its
   * status's index, and no live status has a status index.
   */
  async function expectIndex(expected: Record<string, ByStatus>): Promise<void> {
    const actual: Record<string, ByStatus> = {};
    const sorted: Record<string, ByStatus> = {};
    for (const [workflow, byStatus] of Object.entries(expected)) {
      actual[workflow] = await indexOf(workflow);
      sorted[workflow] = Object.fromEntries(Object.entries(byStatus).map(([s, ids]) => [s, [...ids].sort()]));
    }
    expect(actual).toEqual(sorted);
    for (const [workflow, byStatus] of Object.entries(expected)) {
      expect(await engine.redis.sismember(keys().workflowNames(), workflow)).toBe(1);
      for (const [status, ids] of Object.entries(byStatus)) {
        for (const id of ids) {
          const [stored, storedWorkflow, createdAt, finishedAt] = await engine.redis.hmget(keys().run(id), 'status', 'workflow', 'createdAt', 'finishedAt');
          expect([id, stored, storedWorkflow]).toEqual([id, status, workflow]);
          const score = Number(await engine.redis.zscore(keys().workflowStatusRuns(status, workflow), id));
          expect([id, score]).toEqual([id, Number(ENDED.has(status) ? finishedAt : createdAt)]);
          if (ENDED.has(status)) expect([id, Number(await engine.redis.zscore(keys().status(status), id))]).toEqual([id, Number(finishedAt)]);
        }
      }
    }
    for (const status of STATUSES.filter((s) => !ENDED.has(s))) expect([status, await engine.redis.exists(keys().status(status))]).toEqual([status, 0]);
    // Engines before script version 7 kept every run of a workflow in one more index; this one does not.
    for (const workflow of Object.keys(expected)) expect(await engine.redis.exists(keys().workflowRuns(workflow))).toBe(0);
  }

  const start = async (workflow: string, options: { runAt?: number; input?: unknown } = {}) =>
    (await engine.client.runByName(workflow, options.input ?? {}, options.runAt === undefined ? {} : { runAt: options.runAt })).id;
  /** Claims the next run of a queue as a worker would, with a one-minute lease. */
  const claim = async (token: string, queue = 'default') => (await scripts().claim(queue, token, Date.now(), LEASE_MS))?.runId;
  /** Ends the attempt a claim started, as a worker would. */
  const finish = (runId: string, token: string, outcome: FinishOutcome, a: { payload?: string; dueAt?: number; now?: number; records?: string[] } = {}) =>
    scripts().finish({
      runId,
      queue: 'default',
      token,
      now: a.now ?? Date.now(),
      outcome,
      payload: a.payload ?? '',
      dueAt: a.dueAt ?? 0,
      nextToken: '',
      leaseMs: LEASE_MS,
      waitFields: [],
      records: a.records ?? [],
    });
  const errorJson = (message: string, name = 'Error') => JSON.stringify({ name, message, stack: `${name}: ${message}\n    at handler (app.ts:1:1)` });
  /** Ids in the order a zset lists them newest first: score descending, then id descending. */
  const newestFirst = (entries: Array<[string, number]>) => entries.sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? 1 : -1)).map(([id]) => id);
  const createdAtOf = async (id: string) => Number(await engine.redis.hget(keys().run(id), 'createdAt'));

  it('keeps the index exact through every status move made by the scripts', async () => {
    engine.registry.define('w', {}, () => 1);
    engine.registry.define('billing:charge', {}, () => 1);
    engine.registry.define('limited', { rateLimit: { limit: 1, period: 60_000 } }, () => 1);
    engine.registry.define('throttled', { throttle: { limit: 1, period: 60_000 } }, () => 1);

    const a = await start('w');
    const later = await start('w', { runAt: Date.now() + 60_000 });
    const o = await start('billing:charge');
    await expectIndex({ w: { queued: [a], scheduled: [later] }, 'billing:charge': { queued: [o] } });

    expect(await claim('t1')).toBe(a);
    await expectIndex({ w: { running: [a], scheduled: [later] }, 'billing:charge': { queued: [o] } });
    expect((await finish(a, 't1', 'succeeded', { payload: '1' })).code).toBe('ok');
    await expectIndex({ w: { succeeded: [a], scheduled: [later] }, 'billing:charge': { queued: [o] } });

    // A failed attempt with attempts left waits as scheduled for its retry.
    expect(await claim('t2')).toBe(o);
    expect((await finish(o, 't2', 'retry', { payload: errorJson('first attempt'), dueAt: Date.now() + 60_000 })).code).toBe('ok');
    await expectIndex({ w: { succeeded: [a], scheduled: [later] }, 'billing:charge': { scheduled: [o] } });

    // Both due: promoted to queued.
    expect((await scripts().promote('default', Date.now() + 120_000, 100)).moved).toBe(2);
    await expectIndex({ w: { succeeded: [a], queued: [later] }, 'billing:charge': { queued: [o] } });

    // Claimed, then their worker stops renewing the leases: the reaper queues them again.
    expect([await claim('t3'), await claim('t4')].sort()).toEqual([later, o].sort());
    await expectIndex({ w: { succeeded: [a], running: [later] }, 'billing:charge': { running: [o] } });
    expect((await scripts().reap(Date.now() + 2 * LEASE_MS, 100, 10)).sort()).toEqual([later, o].sort());
    await expectIndex({ w: { succeeded: [a], queued: [later] }, 'billing:charge': { queued: [o] } });

    // Claimed again: one fails for good, the other is canceled while it runs.
    const tokens = new Map<string | undefined, string>([
      [await claim('t5'), 't5'],
      [await claim('t6'), 't6'],
    ]);
    expect((await finish(later, tokens.get(later)!, 'failed', { payload: errorJson('boom') })).code).toBe('ok');
    expect(await engine.client.cancelRun(o)).toBe(true);
    await expectIndex({ w: { succeeded: [a], failed: [later] }, 'billing:charge': { canceled: [o] } });

    // Canceled while queued and while scheduled.
    const q = await start('w');
    const s = await start('w', { runAt: Date.now() + 60_000 });
    await expectIndex({ w: { succeeded: [a], failed: [later], queued: [q], scheduled: [s] }, 'billing:charge': { canceled: [o] } });
    expect(await engine.client.cancelRun(q)).toBe(true);
    expect(await engine.client.cancelRun(s)).toBe(true);
    await expectIndex({ w: { succeeded: [a], failed: [later], canceled: [q, s] }, 'billing:charge': { canceled: [o] } });

    // A run that waits (step.waitFor) is scheduled again; one interrupted too often fails.
    const waiter = await start('w');
    expect(await claim('t7')).toBe(waiter); // the canceled q is dropped from the ready list on the way
    expect((await finish(waiter, 't7', 'wait', { dueAt: Date.now() + 60_000 })).code).toBe('ok');
    const stalled = await start('w');
    expect(await claim('t8')).toBe(stalled);
    expect(await scripts().reap(Date.now() + 2 * LEASE_MS, 100, 0)).toEqual([stalled]);
    await expectIndex({ w: { succeeded: [a], failed: [later, stalled], canceled: [q, s], scheduled: [waiter] }, 'billing:charge': { canceled: [o] } });

    // Admission: over its rate limit a run fails, over its throttle it is scheduled again.
    const limited = [await start('limited'), await start('limited')];
    const throttled = [await start('throttled'), await start('throttled')];
    expect(await claim('t9')).toBe(limited[0]);
    expect(await claim('t10')).toBe(throttled[0]); // limited[1] failed on the way, throttled[1] rescheduled after it
    expect(await claim('t11')).toBeUndefined();
    await expectIndex({
      w: { succeeded: [a], failed: [later, stalled], canceled: [q, s], scheduled: [waiter] },
      'billing:charge': { canceled: [o] },
      limited: { running: [limited[0]], failed: [limited[1]] },
      throttled: { running: [throttled[0]], scheduled: [throttled[1]] },
    });
  });

  it('keeps the index exact while a worker runs, retries, and wakes a parent when its child ends', async () => {
    const gate = deferred();
    const child = engine.registry.define('child', {}, async () => {
      await gate.promise;
      return 2;
    });
    const parent = engine.registry.define('parent', {}, async ({ step }) => (await step.runWorkflow('kid', child, {})) + 1);
    const flaky = engine.registry.define('flaky', { retries: { maxAttempts: 2, delay: 20 } }, ({ run }) => {
      if (run.attempt === 1) throw new Error('The first attempt fails.');
      return 'ok';
    });
    await engine.worker({ concurrency: 4 });
    const p = await engine.client.start(parent, {});
    const childId = `${p.id}.kid`;
    await eventually(async () => (await engine.client.getRun(childId))?.status === 'running' && (await engine.client.getRun(p.id))?.status === 'scheduled');
    await expectIndex({ parent: { scheduled: [p.id] }, child: { running: [childId] } });
    expect((await engine.client.listRunSummaries({ workflow: 'child', status: 'running' })).map((r) => r.id)).toEqual([childId]);

    gate.resolve();
    expect(await p.result({ timeoutMs: 5_000 })).toBe(3);
    const f = await engine.client.start(flaky, {});
    expect(await f.result({ timeoutMs: 5_000 })).toBe('ok');
    expect((await engine.client.getRun(f.id))?.attempt).toBe(2);
    await expectIndex({ parent: { succeeded: [p.id] }, child: { succeeded: [childId] }, flaky: { succeeded: [f.id] } });
  });

  it('pages a workflow and status newest first with offset and limit, the same in listRuns and listRunSummaries', async () => {
    engine.registry.define('paged', {}, () => 1);
    engine.registry.define('noise', { queue: 'elsewhere' }, () => 1);
    const ids: string[] = [];
    for (let i = 0; i < 30; i++) {
      ids.push(await start('paged', { input: { i } }));
      if (i % 3 === 0) await start('noise');
    }
    // 18 end, in an order other than their creation order (7 is prime to 18), 10 ms apart.
    const base = Date.now();
    const ended: Array<[string, number]> = [];
    for (let i = 0; i < 18; i++) {
      const id = (await claim(`t${i}`))!;
      const at = base + ((i * 7) % 18) * 10;
      expect((await finish(id, `t${i}`, 'succeeded', { payload: String(i), now: at })).code).toBe('ok');
      ended.push([id, at]);
    }
    const succeeded = newestFirst(ended);
    const queued = newestFirst(await Promise.all(ids.slice(18).map(async (id): Promise<[string, number]> => [id, await createdAtOf(id)])));
    expect(succeeded).toHaveLength(18);
    expect(queued).toHaveLength(12);

    for (const [status, all] of [
      ['succeeded', succeeded],
      ['queued', queued],
    ] as const) {
      for (const offset of [0, 4, 8, 11, 16, 17, 18, 40]) {
        const page = all.slice(offset, offset + 4);
        const options = { workflow: 'paged', status, limit: 4, offset };
        expect([status, offset, (await engine.client.listRunSummaries(options)).map((r) => r.id)]).toEqual([status, offset, page]);
        expect([status, offset, (await engine.client.listRuns(options)).map((r) => r.id)]).toEqual([status, offset, page]);
      }
    }
    expect(await engine.client.listRunSummaries({ workflow: 'paged', status: 'failed' })).toEqual([]);
    expect(await engine.client.listRunSummaries({ workflow: 'paged', status: 'queued', limit: 0 })).toEqual([]);

    // The other filters list the same runs in both calls.
    for (const options of [
      {},
      { status: 'queued' as const },
      { workflow: 'paged' },
      { workflow: 'noise', status: 'queued' as const },
      { limit: 7, offset: 3 },
      { status: 'succeeded' as const, offset: 5 },
    ]) {
      const runs = (await engine.client.listRuns(options)).map((r) => r.id);
      expect([options, (await engine.client.listRunSummaries(options)).map((r) => r.id)]).toEqual([options, runs]);
    }

    // One row, whole: every field, nothing else.
    const [newest] = await engine.client.listRunSummaries({ workflow: 'paged', status: 'succeeded', limit: 1 });
    const state = (await engine.client.getRun(newest.id))!;
    expect(newest).toStrictEqual({
      id: succeeded[0],
      workflow: 'paged',
      queue: 'default',
      version: 1,
      status: 'succeeded',
      attempt: 1,
      maxAttempts: 1,
      createdAt: state.createdAt,
      availableAt: state.availableAt,
      startedAt: state.startedAt,
      finishedAt: base + 170,
      durationMs: base + 170 - state.startedAt!,
    });
  });

  /** Records the commands a connection sends, pipelined ones included. */
  function recordCommands(redis: RedisConnection): Array<{ name: string; args: string[] }> {
    const sent: Array<{ name: string; args: string[] }> = [];
    const target = redis as unknown as { sendCommand: (command: { name: string; args: unknown[] }, ...rest: unknown[]) => unknown };
    const original = target.sendCommand.bind(redis);
    target.sendCommand = (command, ...rest) => {
      sent.push({ name: command.name, args: command.args.map(String) });
      return original(command, ...rest);
    };
    return sent;
  }

  it('reads summaries without inputs, outputs or steps, and cuts error messages to 200 characters', async () => {
    engine.registry.define('big', { maxAttempts: 3 }, () => 1);
    const huge = 'x'.repeat(1_000_000);
    const ok = await start('big', { input: { huge } });
    const long = await start('big', { input: { huge } });
    const exact = await start('big', { input: { huge } });
    const longMessage = `Card ${'é'.repeat(150)} declined ${'m'.repeat(300)}`;
    const exactMessage = 'e'.repeat(200);
    expect(await claim('t1')).toBe(ok);
    await finish(ok, 't1', 'succeeded', { payload: JSON.stringify({ huge }), records: ['s:charge', JSON.stringify([1, 1, 1, Date.now(), 5, { huge }])] });
    expect(await claim('t2')).toBe(long);
    await finish(long, 't2', 'failed', { payload: errorJson(longMessage, 'PaymentDeclinedError') });
    expect(await claim('t3')).toBe(exact);
    await finish(exact, 't3', 'failed', { payload: errorJson(exactMessage) });

    const sent = recordCommands(engine.redis);
    const rows = await engine.client.listRunSummaries({ workflow: 'big' });
    // Listed by workflow alone: its nine (workflow, status) indexes in one round trip, merged; then the runs.
    expect(sent.map((c) => c.name)).toEqual([...RUN_STATUSES.map(() => 'zrevrange'), 'hmget', 'hmget', 'hmget']);
    const asked = sent.filter((c) => c.name === 'hmget').map((c) => c.args.slice(1));
    expect(asked).toEqual(
      // `wait`: what a scheduled run waits for (small: never input, output or step records).
      [0, 1, 2].map(() => [
        'workflow',
        'queue',
        'status',
        'attempt',
        'maxAttempts',
        'createdAt',
        'availableAt',
        'startedAt',
        'finishedAt',
        'parent',
        'error',
        'wait',
      ]),
    );

    expect(rows.map((r) => r.id).sort()).toEqual([ok, long, exact].sort());
    for (const row of rows) {
      expect(Buffer.byteLength(JSON.stringify(row))).toBeLessThan(1024);
      expect(Object.keys(row).filter((k) => ['input', 'output', 'steps'].includes(k))).toEqual([]);
    }
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(ok)).toMatchObject({ status: 'succeeded', attempt: 1, maxAttempts: 3 });
    expect(byId.get(ok)?.error).toBeUndefined();
    const cut = byId.get(long)!.error!;
    expect(cut).toEqual({ name: 'PaymentDeclinedError', message: `${longMessage.slice(0, 199)}…` });
    expect(cut.message).toHaveLength(200);
    expect(byId.get(exact)!.error).toEqual({ name: 'Error', message: exactMessage });
    // listRuns still reads whole runs.
    expect((await engine.client.listRuns({ workflow: 'big', status: 'succeeded' }))[0]).toMatchObject({ id: ok, input: { huge }, output: { huge } });
  });

  it('returns a corrupt row for a run it cannot read, and the other rows intact', async () => {
    engine.registry.define('w', {}, () => 1);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await start('w', { input: { i } }));
    const [intact, badError, badStatus, badAttempt, noWorkflow] = ids;
    await engine.redis.hset(keys().run(badError), 'error', '{not json');
    await engine.redis.hset(keys().run(badStatus), 'status', 'bogus');
    await engine.redis.hset(keys().run(badAttempt), 'attempt', 'two');
    await engine.redis.hdel(keys().run(noWorkflow), 'workflow');
    const fields = async (id: string) => ({
      id,
      workflow: 'w',
      queue: 'default',
      version: 1,
      status: 'queued',
      attempt: 0,
      maxAttempts: 1,
      createdAt: await createdAtOf(id),
      availableAt: await createdAtOf(id),
    });

    const rows = await engine.client.listRunSummaries({ workflow: 'w', status: 'queued' });
    expect(rows.map((r) => r.id).sort()).toEqual([...ids].sort());
    const byId = new Map<string, RunSummary>(rows.map((r) => [r.id, r]));
    expect(byId.get(intact)).toStrictEqual(await fields(intact));
    expect(byId.get(badError)).toStrictEqual({ ...(await fields(badError)), corrupt: 'field "error" is not valid JSON' });
    // The status comes from the index the run was listed from.
    expect(byId.get(badStatus)).toStrictEqual({ ...(await fields(badStatus)), corrupt: 'field "status" has the unknown value "bogus"' });
    const { attempt: _attempt, ...withoutAttempt } = await fields(badAttempt);
    expect(byId.get(badAttempt)).toStrictEqual({ ...withoutAttempt, corrupt: 'field "attempt" is not a number' });
    const { workflow: _workflow, ...withoutWorkflow } = await fields(noWorkflow);
    expect(byId.get(noWorkflow)).toStrictEqual({ ...withoutWorkflow, corrupt: 'field "workflow" is missing' });

    // Listed by workflow alone or with no filter, the index the run came from tells the status too.
    const byWorkflow = new Map((await engine.client.listRunSummaries({ workflow: 'w' })).map((r) => [r.id, r]));
    expect(byWorkflow.size).toBe(5);
    expect(byWorkflow.get(badStatus)).toMatchObject({ status: 'queued', corrupt: 'field "status" has the unknown value "bogus"' });
    expect((await engine.client.listRunSummaries()).find((r) => r.id === badStatus)).toMatchObject({
      status: 'queued',
      corrupt: 'field "status" has the unknown value "bogus"',
    });

    // listRuns reads whole runs and still refuses a corrupt one.
    await expect(engine.client.listRuns({ workflow: 'w', status: 'queued' })).rejects.toThrow(CorruptRunDataError);
  });

  it('skips and prunes entries left in a wrong status (by an engine older than the index), keeping the page full', async () => {
    engine.registry.define('w', {}, () => 1);
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push(await start('w', { input: { i } }));
    const order = newestFirst(await Promise.all(ids.map(async (id): Promise<[string, number]> => [id, await createdAtOf(id)])));
    // What an older engine leaves: two newest runs ended without their entries moving, one deleted.
    const [endedA, endedB, deleted] = order;
    for (const id of [endedA, endedB]) await engine.redis.hset(keys().run(id), 'status', 'succeeded', 'finishedAt', String(Date.now()));
    await engine.redis.del(keys().run(deleted));
    const live = order.slice(3);

    const page = await engine.client.listRunSummaries({ workflow: 'w', status: 'queued', limit: 3 });
    expect(page.map((r) => [r.id, r.status])).toEqual(live.slice(0, 3).map((id) => [id, 'queued']));
    expect((await engine.redis.zrange(keys().workflowStatusRuns('queued', 'w'), 0, '-1')).sort()).toEqual([...live].sort());
    expect((await engine.client.listRuns({ workflow: 'w', status: 'queued', limit: 3, offset: 1 })).map((r) => r.id)).toEqual(live.slice(1, 4));
  });

  it('retention removes deleted runs from the index', async () => {
    engine.registry.define('w', {}, () => 1);
    const old = Date.now() - 40 * DAY_MS;
    const oldSucceeded = await start('w');
    const oldFailed = await start('w');
    const oldCanceled = await start('w');
    const recent = await start('w');
    expect(await claim('t1')).toBe(oldSucceeded);
    await finish(oldSucceeded, 't1', 'succeeded', { payload: '1', now: old });
    expect(await claim('t2')).toBe(oldFailed);
    await finish(oldFailed, 't2', 'failed', { payload: errorJson('boom'), now: old });
    expect(await scripts().cancel(oldCanceled, old, errorJson('canceled', 'CanceledError'), 'old')).toBe('ok');
    expect(await claim('t3')).toBe(recent);
    await finish(recent, 't3', 'succeeded', { payload: '1' });
    await expectIndex({ w: { succeeded: [oldSucceeded, recent], failed: [oldFailed], canceled: [oldCanceled] } });

    expect(await scripts().cleanup(Date.now() - 30 * DAY_MS, 500)).toBe(3);
    await expectIndex({ w: { succeeded: [recent] } });
    expect(await engine.redis.exists(keys().workflowStatusRuns('failed', 'w'), keys().workflowStatusRuns('canceled', 'w'))).toBe(0);
  });

  it('a starting worker indexes the runs stored before the index existed, once per prefix', async () => {
    engine.registry.define('w', {}, () => 1);
    engine.registry.define('billing:charge', {}, () => 1);
    const queued = await start('w');
    const scheduled = await start('w', { runAt: Date.now() + 60_000 });
    const running = await start('billing:charge');
    const succeeded = await start('w');
    const failed = await start('billing:charge');
    const canceled = await start('w');
    const tokens = ['t1', 't2', 't3', 't4'];
    const claimed = [];
    for (const token of tokens) claimed.push(await claim(token));
    expect(claimed).toEqual([queued, running, succeeded, failed]);
    // Claimed in creation order. `queued` goes back to its queue by reaping its lease alone.
    await finish(succeeded, 't3', 'succeeded', { payload: '1' });
    await finish(failed, 't4', 'failed', { payload: errorJson('boom') });
    await engine.redis.zadd(keys().leases(), 0, queued);
    expect(await scripts().reap(1, 10, 10)).toEqual([queued]);
    expect(await engine.client.cancelRun(canceled)).toBe(true);
    const expected = {
      w: { queued: [queued], scheduled: [scheduled], succeeded: [succeeded], canceled: [canceled] },
      'billing:charge': { running: [running], failed: [failed] },
    };
    await expectIndex(expected);

    // The data of an older engine: every run in its workflow's runs index and in a status index of
    // a live status too, no (workflow, status) index, no `wfnames`, and an entry of a run it moved since.
    for (const [workflow, ids] of Object.entries({ w: [queued, scheduled, succeeded, canceled], 'billing:charge': [running, failed] })) {
      for (const id of ids) await engine.redis.zadd(keys().workflowRuns(workflow), await createdAtOf(id), id);
    }
    await engine.redis.zadd(keys().status('queued'), await createdAtOf(queued), queued);
    await engine.redis.del(keys().workflowNames());
    for (const workflow of ['w', 'billing:charge']) for (const status of STATUSES) await engine.redis.del(keys().workflowStatusRuns(status, workflow));
    await engine.redis.zadd(keys().workflowStatusRuns('queued', 'w'), await createdAtOf(succeeded), succeeded);
    expect(await engine.client.listRunSummaries({ workflow: 'w', status: 'succeeded' })).toEqual([]);

    // Serving a queue without runs: nothing moves while the test looks.
    const worker = await engine.worker({ queues: ['idle'] });
    await worker.runIndexReady;
    expect(await engine.redis.get(keys().workflowStatusIndexMarker())).toBe('2');
    expect(await engine.redis.pttl(keys().workflowStatusIndexMarker())).toBe(-1);
    // The older engine's runs indexes stay (deleted with their runs); its live status indexes go.
    for (const workflow of ['w', 'billing:charge']) await engine.redis.del(keys().workflowRuns(workflow));
    await expectIndex(expected);
    expect((await engine.client.listRunSummaries({ workflow: 'w', status: 'succeeded' })).map((r) => r.id)).toEqual([succeeded]);
    expect((await engine.client.listRuns({ workflow: 'billing:charge', status: 'running' })).map((r) => r.id)).toEqual([running]);

    // A second worker finds the index built and indexes nothing.
    const counts = countScriptCalls(engine.redis);
    const second = await engine.worker({ queues: ['idle'] });
    await second.runIndexReady;
    expect(counts['backfill-run-index']).toBeUndefined();
    expect(await engine.client.backfillRunIndex()).toBe('done');

    // resetState deletes the index and its marker with everything else.
    await createAdmin(engine.client).resetState();
    const indexKeys = ['w', 'billing:charge'].flatMap((w) => STATUSES.map((s) => keys().workflowStatusRuns(s, w)));
    expect(await engine.redis.exists(keys().workflowStatusIndexMarker(), ...indexKeys)).toBe(0);
  });

  it('leaves the marker unfinished when a chunk fails, so that the index is built again', async () => {
    engine.registry.define('w', {}, () => 1);
    const ok = await start('w');
    // As an engine before the index left it: the run in its workflow's runs index only.
    await engine.redis.zadd(keys().workflowRuns('w'), await createdAtOf(ok), ok);
    await engine.redis.del(keys().workflowStatusRuns('queued', 'w'));
    // A key that is not a run hash, listed as a run: reading it fails the chunk.
    await engine.redis.set(keys().run('broken'), 'not a hash');
    await engine.redis.zadd(keys().workflowRuns('w'), Date.now(), 'broken');
    const marker = keys().workflowStatusIndexMarker();

    const lines: string[] = [];
    const logger: RedflowLogger = { log: () => {}, warn: (m) => lines.push(m), error: (m) => lines.push(m) };
    const worker = await engine.worker({ queues: ['idle'], logger });
    await worker.runIndexReady;
    expect(lines).toEqual([
      expect.stringMatching(/could not index the stored runs by workflow and status: Redis script "backfill-run-index" failed: .*WRONGTYPE/),
    ]);
    expect(await engine.redis.get(marker)).toMatch(/^building:[0-9a-f]{16}$/);
    const ttl = await engine.redis.pttl(marker);
    expect(ttl > 0 && ttl <= 30_000).toBe(true);
    // Until its lease runs out, the marker says another process builds the index.
    expect(await engine.client.backfillRunIndex()).toBe('busy');
    await expect(engine.client.backfillRunIndex({ force: true })).rejects.toThrow(RedisScriptError);

    await engine.redis.del(keys().run('broken'));
    await engine.redis.zrem(keys().workflowRuns('w'), 'broken');
    expect(await engine.client.backfillRunIndex({ force: true })).toBe('built');
    expect(await engine.redis.get(marker)).toBe('2');
    expect(await engine.redis.pttl(marker)).toBe(-1);
    expect((await engine.client.listRunSummaries({ workflow: 'w', status: 'queued' })).map((r) => r.id)).toEqual([ok]);
  });
});

describe('a run summary read from stored fields', () => {
  const stored = {
    workflow: 'w',
    queue: 'q',
    status: 'failed',
    attempt: '2',
    maxAttempts: '3',
    createdAt: '1000',
    availableAt: '1500',
    startedAt: '2000',
    finishedAt: '2750',
    parent: 'p1',
    error: JSON.stringify({ name: 'TimeoutError', message: 'Step "charge" timed out.', stack: 'TimeoutError: ...', fields: { timeoutMs: 5 } }),
  };

  it('has every field, numbers as numbers, and the duration of the last attempt', () => {
    expect(summarizeRun('r1', stored)).toStrictEqual({
      id: 'r1',
      workflow: 'w',
      queue: 'q',
      version: 1,
      status: 'failed',
      attempt: 2,
      maxAttempts: 3,
      createdAt: 1000,
      availableAt: 1500,
      startedAt: 2000,
      finishedAt: 2750,
      durationMs: 750,
      parentId: 'p1',
      error: { name: 'TimeoutError', message: 'Step "charge" timed out.' },
    });
    const { startedAt: _s, finishedAt: _f, parent: _p, error: _e, ...queued } = stored;
    expect(summarizeRun('r2', { ...queued, status: 'queued', startedAt: null, finishedAt: null, parent: null, error: null })).toStrictEqual({
      id: 'r2',
      workflow: 'w',
      queue: 'q',
      version: 1,
      status: 'queued',
      attempt: 2,
      maxAttempts: 3,
      createdAt: 1000,
      availableAt: 1500,
    });
  });

  it('cuts a long message to 200 characters without splitting a character made of two UTF-16 units', () => {
    const message = `${'a'.repeat(198)}😀${'b'.repeat(10)}`;
    const error = summarizeRun('r', { ...stored, error: JSON.stringify({ name: 'Error', message }) }).error!;
    expect(error.message).toBe(`${'a'.repeat(198)}…`);
    const fits = `${'a'.repeat(197)}😀b`;
    expect(summarizeRun('r', { ...stored, error: JSON.stringify({ name: 'Error', message: fits }) }).error!.message).toBe(fits);
  });

  it('names every field it cannot read, keeps the others, and takes the status of the index it was listed from', () => {
    const row = summarizeRun(
      'r',
      { ...stored, status: 'done', startedAt: 'soon', maxAttempts: null, error: JSON.stringify(['not', 'an', 'error']) },
      'succeeded',
    );
    expect(row).toStrictEqual({
      id: 'r',
      workflow: 'w',
      queue: 'q',
      version: 1,
      status: 'succeeded',
      attempt: 2,
      createdAt: 1000,
      availableAt: 1500,
      finishedAt: 2750,
      parentId: 'p1',
      corrupt:
        'field "status" has the unknown value "done"; field "maxAttempts" is missing; field "startedAt" is not a number; field "error" has no name and message',
    });
    expect(summarizeRun('r', { ...stored, createdAt: '' }).corrupt).toBe('field "createdAt" is not a number');
    expect(summarizeRun('r', { ...stored, queue: null, status: null }).corrupt).toBe('field "queue" is missing; field "status" is missing');
    expect(summarizeRun('r', { ...stored, status: null }).status).toBeUndefined();
  });
});
