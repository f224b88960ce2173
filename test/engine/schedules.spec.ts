import { join } from 'node:path';
import { z } from 'zod';

import {
  ConfigurationError,
  InputValidationError,
  InvalidCronError,
  PayloadTooLargeError,
  UnknownWorkflowError,
  WorkflowRegistry,
  type RunState,
} from '../../lib';
import { nextCronTick } from '../../lib/core/definition/cron';
import { execKey, readyKey, SCHEDULED } from '../fixtures/schedule-worker';
import { deferred, eventually, TestEngine } from '../support/engine';
import { killWorkerProcess, spawnWorkerProcess, whileAlive, type WorkerProcess } from '../support/worker-process';

const FIXTURE = join(__dirname, '..', 'fixtures', 'schedule-worker.ts');
/** A child compiles the engine with SWC on start-up, so its worker may take a few seconds to start. */
const CHILD_PATIENCE_MS = 15_000;
const EVERY_SECOND = '*/1 * * * * *';
const YEARLY = '0 0 1 1 *';

/** `cron.@<scheduleId>.<tickMs>` → tickMs, or NaN when the id has another shape. */
function tickOf(runId: string, scheduleId: string): number {
  const head = `cron.@${scheduleId}.`;
  return runId.startsWith(head) && /^\d+$/.test(runId.slice(head.length)) ? Number(runId.slice(head.length)) : NaN;
}

/** `nextAt` is the first multiple of `every` after the call that returned it. */
function expectNextMultiple(nextAt: number, every: number): void {
  expect(nextAt % every).toBe(0);
  expect(nextAt).toBeGreaterThan(Date.now() - 5_000);
  expect(nextAt - every).toBeLessThanOrEqual(Date.now());
}

/** Runtime schedules: `client.schedule`, `unschedule` and `listSchedules`, fired by the workers' cron ticker. */
describe('runtime schedules', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const nextOf = async (cronId: string) => {
    const score = await engine.redis.zscore(engine.client.keys.cronNext(), cronId);
    return score === null ? null : Number(score);
  };

  it('adds, lists and removes schedules beside the cron triggers of workflow definitions, in an id space of their own', async () => {
    engine.define('report', { cron: [{ id: 'nightly', expression: YEARLY, timezone: 'UTC' }] }, () => 'report');
    await engine.client.syncRegistry(engine.registry, { owner: 'app' });
    const { client } = engine;

    const nightly = await client.schedule('nightly', { workflow: 'report', cron: '0 3 * * *', timezone: 'UTC', input: { scope: 'all' } });
    const expectedNext = nextCronTick('report', { expression: '0 3 * * *', timezone: 'UTC' }, Date.now());
    expect(nightly).toEqual({ id: 'nightly', workflow: 'report', cron: '0 3 * * *', timezone: 'UTC', input: { scope: 'all' }, nextAt: expectedNext });
    const pulse = await client.schedule('pulse', { workflow: 'report', every: '1m' });
    expect(pulse).toEqual({ id: 'pulse', workflow: 'report', every: 60_000, input: null, nextAt: expect.any(Number) });
    expectNextMultiple(pulse.nextAt!, 60_000);

    expect(await client.listSchedules()).toEqual([nightly, pulse]);
    // The workflow's own cron "nightly" and the schedule "nightly" are two entries.
    expect((await engine.redis.hkeys(client.keys.cronDefs())).sort()).toEqual(['@nightly', '@pulse', 'nightly']);
    expect(await client.listCrons()).toEqual([
      {
        id: 'nightly',
        source: 'definition',
        workflow: 'report',
        expression: YEARLY,
        timezone: 'UTC',
        input: null,
        nextAt: nextCronTick('report', { expression: YEARLY, timezone: 'UTC' }, Date.now()),
      },
      { id: 'nightly', source: 'runtime', workflow: 'report', expression: '0 3 * * *', timezone: 'UTC', input: { scope: 'all' }, nextAt: expectedNext },
      { id: 'pulse', source: 'runtime', workflow: 'report', every: 60_000, input: null, nextAt: pulse.nextAt },
    ]);

    await expect(client.unschedule('nightly')).resolves.toBe(true);
    await expect(client.unschedule('nightly')).resolves.toBe(false);
    await expect(client.unschedule('never-added')).resolves.toBe(false);
    expect(await client.listSchedules()).toEqual([pulse]);
    expect((await client.listCrons()).map((c) => [c.id, c.source])).toEqual([
      ['nightly', 'definition'],
      ['pulse', 'runtime'],
    ]);
    expect(await nextOf('@nightly')).toBeNull();
    expect(await nextOf('nightly')).not.toBeNull();
  });

  it('survives registry sync: a sync that drops the workflow’s crons, or the workflow, keeps the schedules', async () => {
    const { client } = engine;
    const sync = (withCron: boolean, names: string[]) => {
      const registry = new WorkflowRegistry();
      for (const name of names) registry.define(name, withCron ? { cron: [{ expression: YEARLY }] } : {}, () => null);
      return client.syncRegistry(registry, { owner: 'app' });
    };
    await sync(true, ['report', 'audit']);
    await client.schedule('hourly', { workflow: 'report', cron: '0 * * * *' });
    await client.schedule('report#0', { workflow: 'report', every: '5s' });
    await client.schedule('audit', { workflow: 'audit', every: '1h' });
    const before = await client.listSchedules();

    await sync(false, ['report', 'audit']);
    expect((await engine.redis.hkeys(client.keys.cronDefs())).sort()).toEqual(['@audit', '@hourly', '@report#0']);
    await expect(sync(false, ['report'])).resolves.toEqual(['audit']);
    expect(await client.listSchedules()).toEqual(before);
    expect((await client.listCrons()).every((c) => c.source === 'runtime')).toBe(true);
  });

  it('replaces a schedule given again under its id, keeping its next tick only when nothing changed', async () => {
    engine.define('report', {}, () => null);
    engine.define('digest', {}, () => null);
    const { client } = engine;
    const first = await client.schedule('daily', { workflow: 'report', cron: '0 6 * * *', timezone: 'UTC', input: { n: 1 } });
    // Marked, to tell a kept next tick apart from a recomputed one.
    await engine.redis.zadd(client.keys.cronNext(), 12345, '@daily');
    await expect(client.schedule('daily', { workflow: 'report', cron: '0 6 * * *', timezone: 'UTC', input: { n: 1 } })).resolves.toEqual({
      ...first,
      nextAt: 12345,
    });

    const newInput = await client.schedule('daily', { workflow: 'report', cron: '0 6 * * *', timezone: 'UTC', input: { n: 2 } });
    expect(newInput.nextAt).toBe(first.nextAt);
    expect(await nextOf('@daily')).toBe(first.nextAt);
    const interval = await client.schedule('daily', { workflow: 'digest', every: '2h' });
    expect(interval).toEqual({ id: 'daily', workflow: 'digest', every: 7_200_000, input: null, nextAt: expect.any(Number) });
    expectNextMultiple(interval.nextAt!, 7_200_000);
    expect(await client.listSchedules()).toEqual([interval]);
    expect(JSON.parse((await engine.redis.hget(client.keys.cronDefs(), '@daily'))!)).toEqual({ workflow: 'digest', every: 7_200_000, input: null });
  });

  it('fires every tick of an every "1s" schedule and of a per-second cron schedule, with its input, until unscheduled', async () => {
    const runs = new Map<string, Array<{ id: string; input: unknown }>>();
    const two = { interval: deferred(), cron: deferred() };
    engine.define('tick', { maxConcurrency: Infinity }, ({ run, input }: { run: { id: string }; input: { kind: 'interval' | 'cron' } }) => {
      const list = runs.get(input.kind) ?? [];
      list.push({ id: run.id, input });
      runs.set(input.kind, list);
      if (list.length === 2) two[input.kind].resolve();
      return list.length;
    });
    await engine.worker();
    const { client } = engine;
    // overlap 'allow': every tick is wanted here, even one that comes before the previous run ended.
    const interval = await client.schedule('interval', { workflow: 'tick', every: '1s', input: { kind: 'interval' }, overlap: 'allow' });
    const cron = await client.schedule('cron', { workflow: 'tick', cron: EVERY_SECOND, input: { kind: 'cron' }, overlap: 'allow' });
    await Promise.all([two.interval.promise, two.cron.promise]);
    await expect(client.unschedule('interval')).resolves.toBe(true);
    await expect(client.unschedule('cron')).resolves.toBe(true);

    for (const [id, first] of [
      ['interval', interval.nextAt!],
      ['cron', cron.nextAt!],
    ] as const) {
      const fired = runs.get(id)!.slice(0, 2);
      const ticks = fired.map((r) => tickOf(r.id, id));
      expect(ticks).toEqual([first, first + 1000]);
      expect(ticks.map((t) => t % 1000)).toEqual([0, 0]);
      expect(fired.map((r) => r.input)).toEqual([{ kind: id }, { kind: id }]);
      await expect(client.handle(fired[1].id).result({ timeoutMs: 5_000 })).resolves.toBe(2);
    }
    expect(await client.listSchedules()).toEqual([]);
    expect(await engine.redis.zcard(client.keys.cronNext())).toBe(0);
  });

  it('schedules a workflow registered in Redis by another process, as runByName starts it', async () => {
    const elsewhere = new WorkflowRegistry();
    elsewhere.define('remote', { queue: 'remote' }, () => null);
    await engine.client.syncRegistry(elsewhere, { owner: 'other-app' });
    await expect(engine.client.schedule('remote-daily', { workflow: 'remote', cron: '0 6 * * *', input: { any: 'thing' } })).resolves.toMatchObject({
      id: 'remote-daily',
      workflow: 'remote',
      input: { any: 'thing' },
    });
  });

  it('rejects bad schedules with named errors, and stores nothing', async () => {
    engine.define('report', {}, () => null);
    engine.define('typed', { schema: z.object({ scope: z.enum(['all', 'mine']) }) }, () => null);
    engine.define('keyed', { mutex: (input: { tenant: string }) => input.tenant }, () => null);
    const remote = new WorkflowRegistry();
    remote.define('remote-keyed', { mutex: (input: { tenant: string }) => input.tenant }, () => null);
    await engine.client.syncRegistry(remote, { owner: 'other-app' });
    const { client } = engine;
    const schedule = (id: unknown, options: unknown) => client.schedule(id as string, options as never);

    const cases: Array<[Promise<unknown>, new (...args: never[]) => Error, string]> = [
      [schedule('', { workflow: 'report', every: '1s' }), ConfigurationError, 'The schedule id must be a non-empty string of at most 512 characters, got "".'],
      [schedule('a\nb', { workflow: 'report', every: '1s' }), ConfigurationError, 'The schedule id must not contain control characters'],
      [schedule(7, { workflow: 'report', every: '1s' }), ConfigurationError, 'The schedule id must be a non-empty string'],
      [schedule('s', undefined), ConfigurationError, 'schedule("s") needs options: { workflow, cron or every, input?, timezone? }.'],
      [schedule('s', { workflow: 'report', evry: '1s' }), ConfigurationError, 'Unknown option "evry" in the options of schedule "s". Did you mean "every"?'],
      [schedule('s', { every: '1s' }), ConfigurationError, 'workflow of schedule "s" must be a workflow name, got undefined.'],
      [
        schedule('s', { workflow: 'report' }),
        ConfigurationError,
        'Schedule "s" needs exactly one of cron (an expression such as "0 9 * * 1-5"), every (an interval such as "30s") and rrule (an RFC 5545 rule), got none.',
      ],
      [schedule('s', { workflow: 'report', cron: EVERY_SECOND, every: '1s' }), ConfigurationError, 'got cron and every.'],
      [schedule('s', { workflow: 'report', cron: 'not a cron' }), InvalidCronError, 'Cron expression "not a cron" of workflow "report" is invalid'],
      [
        schedule('s', { workflow: 'report', cron: EVERY_SECOND, timezone: 'Mars/Olympus' }),
        InvalidCronError,
        'with time zone "Mars/Olympus" of workflow "report" is invalid',
      ],
      [schedule('s', { workflow: 'report', cron: 5 }), ConfigurationError, 'cron of schedule "s" must be a cron expression such as "0 9 * * 1-5", got 5.'],
      [schedule('s', { workflow: 'report', every: '500ms' }), ConfigurationError, 'every of schedule "s" must be at least 1 s (1000 ms), got "500ms".'],
      [schedule('s', { workflow: 'report', every: 999 }), ConfigurationError, 'every of schedule "s" must be at least 1 s (1000 ms), got 999.'],
      [schedule('s', { workflow: 'report', every: 'soon' }), ConfigurationError, 'every of schedule "s" must be a duration > 0'],
      [schedule('s', { workflow: 'report', every: '1m', timezone: 'UTC' }), ConfigurationError, 'timezone of schedule "s" applies to a cron expression only'],
      [schedule('s', { workflow: 'nobody', every: '1m' }), UnknownWorkflowError, 'Workflow "nobody" is not registered in this process or in Redis.'],
      [
        schedule('s', { workflow: 'typed', every: '1m', input: { scope: 'everything' } }),
        InputValidationError,
        'Input for workflow "typed" is invalid: scope:',
      ],
      [schedule('s', { workflow: 'typed', every: '1m' }), InputValidationError, 'Input for workflow "typed" is invalid'],
      [schedule('s', { workflow: 'report', every: '1m', input: { at: NaN } }), InputValidationError, 'Input for workflow "report" is invalid: $.at is NaN'],
      [schedule('s', { workflow: 'report', every: '1m', input: { page: 'x'.repeat(2 * 1024 * 1024) } }), PayloadTooLargeError, 'The input of schedule "s" is'],
      [
        schedule('s', { workflow: 'keyed', every: '1m', input: { tenant: 't' } }),
        ConfigurationError,
        'Schedule "s" cannot start workflow "keyed": it computes a mutex',
      ],
      [
        schedule('s', { workflow: 'remote-keyed', every: '1m', input: { tenant: 't' } }),
        ConfigurationError,
        'Schedule "s" cannot start workflow "remote-keyed"',
      ],
      [client.unschedule(''), ConfigurationError, 'The schedule id must be a non-empty string'],
    ];
    for (const [attempt, cls, message] of cases) {
      const error = await attempt.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect([message, error instanceof cls, (error as Error)?.name]).toEqual([message, true, cls.name]);
      expect((error as Error).message).toContain(message);
    }
    expect(await client.listSchedules()).toEqual([]);
    expect(await engine.redis.hlen(client.keys.cronDefs())).toBe(0);
    expect(await engine.redis.zcard(client.keys.cronNext())).toBe(0);
  });

  describe('across worker processes', () => {
    let children: WorkerProcess[] = [];

    afterEach(async () => {
      await Promise.all(children.map((c) => killWorkerProcess(c)));
      children = [];
    });

    it('fires once per tick when 3 worker processes serve an every "1s" schedule', async () => {
      // The fixture stops when its stdin closes.
      for (let i = 0; i < 3; i++) children.push(spawnWorkerProcess(FIXTURE, { REDFLOW_SCHEDULE_PREFIX: engine.prefix }, 'pipe'));
      const whileChildrenRun = (check: () => Promise<boolean>, timeoutMs = CHILD_PATIENCE_MS) => whileAlive(children, 'A schedule worker', check, timeoutMs);
      await whileChildrenRun(async () => (await engine.redis.llen(readyKey(engine.prefix))) === 3);

      // Scheduled from this process, which has no worker and not the workflow's definition.
      const scheduled = await engine.client.schedule('every-second', { workflow: SCHEDULED, every: '1s', input: { source: 'schedule' }, overlap: 'allow' });
      const listed = () => engine.client.listRuns({ workflow: SCHEDULED, limit: 1000 });
      let runs: RunState[] = [];
      await whileChildrenRun(async () => {
        runs = await listed();
        return runs.length >= 3 && runs.every((r) => r.status === 'succeeded');
      }, 8_000);
      await expect(engine.client.unschedule('every-second')).resolves.toBe(true);
      // A tick being fired while unscheduling ends too.
      await eventually(async () => (await listed()).every((r) => r.status === 'succeeded'));
      runs = await listed();

      const ticks = runs.map((r) => tickOf(r.id, 'every-second')).sort((a, b) => a - b);
      expect(ticks.length).toBeGreaterThanOrEqual(3);
      // One run per tick, on consecutive seconds from the first tick the schedule announced.
      expect(ticks.map((t, i) => t - ticks[0] - i * 1000)).toEqual(ticks.map(() => 0));
      expect(ticks[0]).toBe(scheduled.nextAt);
      expect(new Set(ticks).size).toBe(runs.length);
      expect(await engine.client.countRuns({ workflow: SCHEDULED })).toBe(runs.length);
      expect(runs.map((r) => r.input)).toEqual(runs.map(() => ({ source: 'schedule' })));
      // Each run's handler ran once, in one of the processes.
      expect(await engine.redis.mget(...runs.map((r) => execKey(engine.prefix, r.id)))).toEqual(runs.map(() => '1'));
    });
  });
});
