import { ConfigurationError, createSchedules, type RunState, type WorkflowContext, type WorkflowSchedules } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

const HOUR = 3_600_000;
const MINUTE = 60_000;

/**
 * Schedule policies and control, on the engine's virtual clock: `missed` (ticks found over a minute
 * late), `overlap` (a tick whose previous run goes on), pause / resume, trigger, backfill and
 * preview. Each test moves the clock to a known place between ticks first, so "late" does not
 * depend on the real time the test runs at.
 */
describe('schedule policies', () => {
  let engine: TestEngine;
  let schedules: WorkflowSchedules;
  beforeEach(() => {
    engine = new TestEngine();
    schedules = createSchedules(engine.client);
  });
  afterEach(() => engine.close());

  /** Moves the clock to `offset` ms after the next multiple of `every` (the schedule's tick grid). */
  async function moveToGrid(every: number, offset: number): Promise<number> {
    const now = engine.clock.now();
    const boundary = (Math.floor(now / every) + 1) * every;
    await engine.clock.advance(boundary + offset - now);
    return boundary;
  }

  /** The runs of `workflow`, oldest tick first, with the tick each was started for. */
  async function runsOf(workflow: string): Promise<Array<RunState & { tick: number }>> {
    const runs = await engine.client.listRuns({ workflow, limit: 100 });
    return runs.map((r) => ({ ...r, tick: Number(r.id.slice(r.id.lastIndexOf('.') + 1)) })).sort((a, b) => a.tick - b.tick);
  }

  /** A workflow whose runs wait for the signal "done", recording the `scheduledAt` each run saw. */
  function waiting(name: string, seen: number[] = []) {
    return engine.define(name, {}, async ({ step, scheduledAt }: WorkflowContext) => {
      seen.push(scheduledAt?.getTime() ?? NaN);
      await step.waitForSignal('done', 'done');
      return 'ok';
    });
  }

  it("missed: 'once' (the default) fires the first missed tick once, then goes on after now", async () => {
    engine.define('report', {}, () => 'ok');
    const start = await moveToGrid(HOUR, 10 * MINUTE);
    await engine.client.syncRegistry(engine.registry, { owner: 'app' });
    await schedules.upsert('hourly', { workflow: 'report', every: '1h', overlap: 'allow' });
    // No worker for five hours: ticks at start + 1h ... + 5h are missed.
    await engine.clock.advance(5 * HOUR);
    await engine.worker();
    await eventually(async () => (await runsOf('report')).length === 1);
    await eventually(async () => (await schedules.get('hourly'))?.nextAt === start + 6 * HOUR);
    expect((await runsOf('report')).map((r) => r.tick)).toEqual([start + HOUR]);
  });

  it("missed: 'skip' drops the missed ticks and fires the next one on time", async () => {
    engine.define('report', {}, () => 'ok');
    const start = await moveToGrid(HOUR, 10 * MINUTE);
    await engine.client.syncRegistry(engine.registry, { owner: 'app' });
    await schedules.upsert('hourly', { workflow: 'report', every: '1h', missed: 'skip' });
    await engine.clock.advance(5 * HOUR);
    await engine.worker();
    await eventually(async () => (await schedules.get('hourly'))?.nextAt === start + 6 * HOUR);
    expect(await runsOf('report')).toEqual([]);
    await engine.clock.advance(50 * MINUTE); // the tick at start + 6h, on time
    await eventually(async () => (await runsOf('report')).length === 1);
    expect((await runsOf('report')).map((r) => r.tick)).toEqual([start + 6 * HOUR]);
  });

  it("missed: 'all' fires each missed tick in order, the latest missedLimit of them", async () => {
    engine.define('report', {}, () => 'ok');
    const start = await moveToGrid(HOUR, 10 * MINUTE);
    await engine.client.syncRegistry(engine.registry, { owner: 'app' });
    await schedules.upsert('hourly', { workflow: 'report', every: '1h', missed: 'all', missedLimit: 3, overlap: 'allow' });
    await engine.clock.advance(5 * HOUR);
    await engine.worker();
    await eventually(async () => (await runsOf('report')).length === 3);
    await eventually(async () => (await schedules.get('hourly'))?.nextAt === start + 6 * HOUR);
    expect((await runsOf('report')).map((r) => r.tick)).toEqual([start + 3 * HOUR, start + 4 * HOUR, start + 5 * HOUR]);
  });

  it("overlap: 'skip' (the default) starts nothing while the previous run goes on; the run knows its tick", async () => {
    const seen: number[] = [];
    waiting('sync', seen);
    const start = await moveToGrid(MINUTE, 1_000);
    await engine.worker();
    await schedules.upsert('sync', { workflow: 'sync', every: '1m' });
    await engine.clock.advance(MINUTE);
    const [first] = await eventually(async () => {
      const runs = await runsOf('sync');
      return runs.length === 1 && runs[0].waitingFor ? runs : undefined;
    });
    expect(first.tick).toBe(start + MINUTE);
    expect(seen).toEqual([start + MINUTE]);
    await engine.clock.advance(MINUTE); // the previous run still waits: skipped
    await eventually(async () => (await schedules.get('sync'))?.nextAt === start + 3 * MINUTE);
    expect(await runsOf('sync')).toHaveLength(1);
    await engine.client.signal(first.id, 'done');
    await eventually(async () => (await engine.client.getRun(first.id))?.status === 'succeeded');
    await engine.clock.advance(MINUTE);
    await eventually(async () => (await runsOf('sync')).length === 2);
    expect((await runsOf('sync')).map((r) => r.tick)).toEqual([start + MINUTE, start + 3 * MINUTE]);
  });

  it("overlap: 'allow' starts a run per tick beside the previous ones", async () => {
    waiting('sync');
    const start = await moveToGrid(MINUTE, 1_000);
    await engine.worker();
    await schedules.upsert('sync', { workflow: 'sync', every: '1m', overlap: 'allow' });
    await engine.clock.advance(MINUTE);
    await eventually(async () => (await runsOf('sync')).length === 1);
    await engine.clock.advance(MINUTE);
    await eventually(async () => (await runsOf('sync')).length === 2);
    expect((await runsOf('sync')).map((r) => r.tick)).toEqual([start + MINUTE, start + 2 * MINUTE]);
  });

  it("overlap: 'cancel-previous' cancels the run that goes on, naming the policy, and starts the tick's", async () => {
    waiting('sync');
    const start = await moveToGrid(MINUTE, 1_000);
    await engine.worker();
    await schedules.upsert('sync', { workflow: 'sync', every: '1m', overlap: 'cancel-previous' });
    await engine.clock.advance(MINUTE);
    const [first] = await eventually(async () => {
      const runs = await runsOf('sync');
      return runs.length === 1 && runs[0].waitingFor ? runs : undefined;
    });
    await engine.clock.advance(MINUTE);
    await eventually(async () => (await runsOf('sync')).length === 2);
    const canceled = await eventually(async () => {
      const run = await engine.client.getRun(first.id);
      return run?.status === 'canceled' ? run : undefined;
    });
    expect(canceled.error?.message).toContain('overlap policy is cancel-previous');
    const second = (await runsOf('sync'))[1];
    expect(second.tick).toBe(start + 2 * MINUTE);
    expect(second.status).not.toBe('canceled');
  });

  it("overlap: 'buffer-one' starts the held tick when the previous run ends, and drops the ticks that came meanwhile", async () => {
    const seen: number[] = [];
    waiting('sync', seen);
    const start = await moveToGrid(MINUTE, 1_000);
    await engine.worker();
    await schedules.upsert('sync', { workflow: 'sync', every: '1m', overlap: 'buffer-one' });
    await engine.clock.advance(MINUTE);
    const [first] = await eventually(async () => {
      const runs = await runsOf('sync');
      return runs.length === 1 && runs[0].waitingFor ? runs : undefined;
    });
    await engine.clock.advance(MINUTE); // held
    await eventually(async () => (await engine.redis.hget(engine.client.keys.cronBuffered(), '@sync')) === String(start + 2 * MINUTE));
    await engine.clock.advance(MINUTE); // dropped: one tick is held already
    expect(await runsOf('sync')).toHaveLength(1);
    await engine.client.signal(first.id, 'done');
    // Within a second of the previous run's end, the held tick's run starts, as that tick.
    await eventually(async () => (await runsOf('sync')).length === 2);
    expect((await runsOf('sync')).map((r) => r.tick)).toEqual([start + MINUTE, start + 2 * MINUTE]);
    // Each handler run saw its own tick (the first run's handler ran again when the signal woke it).
    await eventually(() => seen.includes(start + 2 * MINUTE));
    expect([...new Set(seen)]).toEqual([start + MINUTE, start + 2 * MINUTE]);
    expect(await engine.redis.hget(engine.client.keys.cronBuffered(), '@sync')).toBeNull();
  });

  it('pause stops the ticks, across a registry sync, and resume goes on after now; both for runtime schedules and triggers', async () => {
    engine.define('report', { cron: [{ id: 'nightly', expression: '0 3 * * *', timezone: 'UTC' }] }, () => 'ok');
    await moveToGrid(MINUTE, 1_000);
    await engine.worker();
    await schedules.upsert('pulse', { workflow: 'report', every: '1m' });
    const paused = await schedules.pause('pulse', { note: 'the report service is migrating' });
    expect(paused).toMatchObject({ id: 'pulse', source: 'runtime', paused: { note: 'the report service is migrating', at: expect.any(Number) } });
    expect(engine.clock.now() - paused.paused!.at).toBeLessThan(5_000);
    expect(paused.nextAt).toBeUndefined();
    expect(await schedules.pause('nightly')).toMatchObject({ source: 'definition', paused: { at: expect.any(Number) } });
    // A registry sync (every worker start) keeps the trigger paused.
    await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
    expect((await schedules.get('nightly'))?.nextAt).toBeUndefined();
    await engine.clock.advance(3 * MINUTE);
    expect(await runsOf('report')).toEqual([]);

    const resumed = await schedules.resume('pulse');
    expect(resumed.paused).toBeUndefined();
    expect(resumed.nextAt).toBe((Math.floor(engine.clock.now() / MINUTE) + 1) * MINUTE);
    await engine.clock.advance(MINUTE);
    await eventually(async () => (await runsOf('report')).length === 1);
    expect((await schedules.resume('nightly')).nextAt).toBeGreaterThan(engine.clock.now());
  });

  it('trigger starts a run now under the overlap policy; backfill fires each tick of a range once', async () => {
    waiting('sync');
    engine.define('report', {}, () => 'ok');
    await engine.worker();
    await schedules.upsert('sync', { workflow: 'sync', cron: '0 9 * * *', timezone: 'UTC' });
    const fired = await schedules.trigger('sync');
    expect(fired).toEqual({ at: expect.any(Number), outcome: 'fired', runId: `cron.@sync.${fired.at}` });
    expect(engine.clock.now() - fired.at).toBeLessThan(5_000);
    await eventually(async () => (await engine.client.getRun(fired.runId!))?.waitingFor);
    await engine.clock.advance(5);
    // The previous run goes on: the default overlap policy ('skip') starts nothing.
    expect(await schedules.trigger('sync')).toEqual({ at: expect.any(Number), outcome: 'overlap' });

    await schedules.upsert('daily', { workflow: 'report', cron: '0 9 * * *', timezone: 'UTC', overlap: 'allow' });
    const from = Date.UTC(2026, 0, 1);
    const to = Date.UTC(2026, 0, 3, 9);
    const first = await schedules.backfill('daily', { from, to });
    const days = [Date.UTC(2026, 0, 1, 9), Date.UTC(2026, 0, 2, 9), Date.UTC(2026, 0, 3, 9)];
    expect(first).toEqual(days.map((at) => ({ at, outcome: 'fired', runId: `cron.@daily.${at}` })));
    await eventually(async () => (await runsOf('report')).filter((r) => r.status === 'succeeded').length === 3);
    // The same range again starts nothing new: each tick's run id is its own.
    await schedules.backfill('daily', { from, to });
    expect((await runsOf('report')).map((r) => r.tick)).toEqual(days);
    await expect(schedules.backfill('daily', { from: to, to: from })).rejects.toThrow('is before from');
    await expect(schedules.backfill('daily', { from: 0, to: Date.UTC(2026, 0, 1) })).rejects.toThrow('more than 1000 ticks');
  });

  it('bounds: no tick before startAt nor after endAt, and no more runs than limit; an ended schedule stays listed', async () => {
    engine.define('report', {}, () => 'ok');
    const start = await moveToGrid(MINUTE, 1_000);
    await engine.worker();
    // overlap 'allow': on the virtual clock a tick can come before the previous tick's run has ended.
    const later = await schedules.upsert('later', {
      workflow: 'report',
      every: '1m',
      startAt: start + 5 * MINUTE,
      endAt: start + 6 * MINUTE,
      overlap: 'allow',
    });
    expect(later.nextAt).toBe(start + 5 * MINUTE);
    await schedules.upsert('twice', { workflow: 'report', every: '1m', limit: 2, overlap: 'allow' });
    for (let i = 0; i < 3; i++) {
      await engine.clock.advance(MINUTE);
      await eventually(async () => {
        const next = (await schedules.get('twice'))?.nextAt;
        return next === undefined || next > engine.clock.now();
      });
    }
    await eventually(async () => (await runsOf('report')).length === 2);
    const twice = await schedules.get('twice');
    expect(twice?.nextAt).toBeUndefined();
    expect(twice?.paused).toBeUndefined();
    expect((await runsOf('report')).map((r) => r.tick)).toEqual([start + MINUTE, start + 2 * MINUTE]);
    // 'later' fires its two ticks (5 and 6 minutes in), then ends.
    await engine.clock.advance(2 * MINUTE);
    await eventually(async () => (await runsOf('report')).length === 3);
    await engine.clock.advance(MINUTE);
    await eventually(async () => (await runsOf('report')).length === 4);
    await eventually(async () => (await schedules.get('later'))?.nextAt === undefined);
    expect((await runsOf('report')).map((r) => r.tick)).toEqual([start + MINUTE, start + 2 * MINUTE, start + 5 * MINUTE, start + 6 * MINUTE]);
    expect(await schedules.preview('later', 3, start)).toEqual([new Date(start + 5 * MINUTE), new Date(start + 6 * MINUTE)]);
    await expect(schedules.upsert('bad', { workflow: 'report', every: '1m', startAt: start, endAt: start - 1 })).rejects.toThrow(
      'endAt of schedule "bad" must be after its startAt',
    );
  });

  it("a trigger's input can be a function of its tick's time; one that throws drops the tick, loudly", async () => {
    const errors: string[] = [];
    engine.define('daily', { cron: [{ id: 'daily', expression: '* * * * *', input: (at: Date) => ({ day: at.toISOString() }) }] }, ({ input }) => input);
    let calls = 0;
    engine.define(
      'fragile',
      {
        cron: [
          {
            id: 'fragile',
            expression: '* * * * *',
            input: () => {
              if (++calls === 1) throw new Error('the calendar service is down');
              return { ok: true };
            },
          },
        ],
      },
      ({ input }) => input,
    );
    const start = await moveToGrid(MINUTE, 1_000);
    await engine.worker({ logger: { log: () => undefined, warn: () => undefined, error: (m) => errors.push(m) } });
    await engine.clock.advance(MINUTE);
    const [run] = await eventually(async () => {
      const runs = await runsOf('daily');
      return runs[0]?.status === 'succeeded' ? runs : undefined;
    });
    expect(run.input).toEqual({ day: new Date(start + MINUTE).toISOString() });
    expect(run.output).toEqual({ day: new Date(start + MINUTE).toISOString() });
    await eventually(() => errors.some((e) => e.includes('the calendar service is down')));
    expect(errors.find((e) => e.includes('calendar'))).toBe(
      `Cron "fragile" dropped its tick at ${new Date(start + MINUTE).toISOString()}: its input function failed: the calendar service is down`,
    );
    expect(await runsOf('fragile')).toEqual([]);
    await engine.clock.advance(MINUTE);
    await eventually(async () => (await runsOf('fragile')).length === 1);
    expect((await runsOf('fragile'))[0].tick).toBe(start + 2 * MINUTE);
  });

  it('previews the next fire times, each local time once on the days clocks change, in two time zones', async () => {
    engine.define('report', {}, () => 'ok');
    await engine.client.syncRegistry(engine.registry, { owner: 'app' });
    const local = (d: Date, timeZone: string) => d.toLocaleString('sv', { timeZone });
    for (const [timeZone, springForward, fallBack] of [
      ['America/New_York', Date.UTC(2027, 2, 13, 12), Date.UTC(2027, 10, 6, 12)],
      ['Europe/Berlin', Date.UTC(2027, 2, 27, 12), Date.UTC(2027, 9, 30, 12)],
    ] as const) {
      await schedules.upsert(`nightly-${timeZone}`, { workflow: 'report', cron: '30 2 * * *', timezone: timeZone });
      // 02:30 does not exist on the spring-forward day: it fires once, at 03:00.
      const spring = await schedules.preview(`nightly-${timeZone}`, 3, springForward);
      expect(spring.map((d) => local(d, timeZone).slice(0, 16))).toEqual([
        `${local(new Date(springForward + 86_400_000), timeZone).slice(0, 10)} 03:00`,
        `${local(new Date(springForward + 2 * 86_400_000), timeZone).slice(0, 10)} 02:30`,
        `${local(new Date(springForward + 3 * 86_400_000), timeZone).slice(0, 10)} 02:30`,
      ]);
      // On the fall-back day, a time that happens twice fires once.
      await schedules.upsert(`early-${timeZone}`, { workflow: 'report', cron: '30 1 * * *', timezone: timeZone });
      const fall = await schedules.preview(timeZone === 'Europe/Berlin' ? `nightly-${timeZone}` : `early-${timeZone}`, 3, fallBack);
      const days = fall.map((d) => local(d, timeZone).slice(0, 10));
      expect(new Set(days).size).toBe(3);
    }
  });

  it('a calendar rule (RFC 5545) says what cron cannot, in its own time zone, and the ticker fires it', async () => {
    engine.define('report', {}, () => 'ok');
    await engine.worker();
    const monthEnd = 'DTSTART;TZID=Europe/Paris:20270101T090000\nRRULE:FREQ=MONTHLY;BYDAY=-1FR';
    expect(await schedules.upsert('month-end', { workflow: 'report', rrule: monthEnd })).toMatchObject({ rrule: monthEnd, nextAt: expect.any(Number) });
    // The last Friday of each month at 09:00 Paris time: 08:00 UTC in winter, 07:00 in summer.
    expect((await schedules.preview('month-end', 4, Date.UTC(2027, 0, 1))).map((d) => d.toISOString())).toEqual([
      '2027-01-29T08:00:00.000Z',
      '2027-02-26T08:00:00.000Z',
      '2027-03-26T08:00:00.000Z',
      '2027-04-30T07:00:00.000Z',
    ]);
    expect((await schedules.get('month-end'))?.rrule).toBe(monthEnd);

    const start = await moveToGrid(MINUTE, 1_000);
    const dtstart = `${new Date(start).toISOString().replace(/[-:]/g, '').slice(0, 15)}Z`;
    await schedules.upsert('two-minutes', { workflow: 'report', rrule: `DTSTART:${dtstart}\nRRULE:FREQ=MINUTELY;INTERVAL=2;COUNT=2` });
    await engine.clock.advance(2 * MINUTE);
    await eventually(async () => (await runsOf('report')).length === 1);
    expect((await runsOf('report'))[0].tick).toBe(start + 2 * MINUTE);
    // COUNT=2: the rule's own end ends the schedule.
    await eventually(async () => (await schedules.get('two-minutes'))?.nextAt === undefined);

    await expect(schedules.upsert('x', { workflow: 'report', rrule: 'RRULE:FREQ=DAILY' })).rejects.toThrow(
      'rrule of schedule "x" must start with its DTSTART line',
    );
    await expect(schedules.upsert('x', { workflow: 'report', rrule: 'DTSTART:20270101T090000Z\nRRULE:FREQ=SOMETIMES' })).rejects.toThrow(
      'rrule of schedule "x" is not a valid RFC 5545 rule',
    );
    await expect(schedules.upsert('x', { workflow: 'report', rrule: monthEnd, timezone: 'UTC' })).rejects.toThrow(
      'give a calendar rule its time zone in its DTSTART line',
    );
    await expect(schedules.upsert('x', { workflow: 'report', rrule: monthEnd, every: '1h' })).rejects.toThrow('got every and rrule');
  });

  it("a workflow's trigger takes a calendar rule too: previewed, listed and fired like a runtime one; a rule with an expression is refused", async () => {
    const start = await moveToGrid(MINUTE, 1_000);
    const dtstart = `${new Date(start).toISOString().replace(/[-:]/g, '').slice(0, 15)}Z`;
    engine.define(
      'ruled',
      { cron: [{ id: 'every-other-minute', rrule: `DTSTART:${dtstart}\nRRULE:FREQ=MINUTELY;INTERVAL=2;COUNT=3`, overlap: 'allow' }] },
      () => 'ok',
    );
    await engine.worker();
    expect((await schedules.preview('every-other-minute', 3)).map((d) => d.getTime())).toEqual([start + 2 * MINUTE, start + 4 * MINUTE]);
    expect((await schedules.get('every-other-minute'))?.rrule).toContain('FREQ=MINUTELY;INTERVAL=2');
    await engine.clock.advance(2 * MINUTE);
    await eventually(async () => (await runsOf('ruled')).length === 1);
    expect((await runsOf('ruled'))[0].tick).toBe(start + 2 * MINUTE);

    const monthEnd = 'DTSTART;TZID=Europe/Paris:20270101T090000\nRRULE:FREQ=MONTHLY;BYDAY=-1FR';
    expect(() => engine.define('both', { cron: [{ rrule: monthEnd, expression: '0 9 * * *' }] }, () => 'x')).toThrow(
      'cron trigger "both#0" of workflow "both" has an rrule and an expression or timezone: give one of them',
    );
    expect(() => engine.define('neither', { cron: [{ id: 'n' }] }, () => 'x')).toThrow(
      'cron trigger "n" of workflow "neither" needs an expression (a cron expression such as "0 9 * * 1-5") or an rrule, got undefined.',
    );
    expect(() => engine.define('bad-rule', { cron: [{ rrule: 'RRULE:FREQ=DAILY' }] }, () => 'x')).toThrow('must start with its DTSTART line');
  });

  it('refuses bad policies and unknown ids with named errors', async () => {
    engine.define('report', {}, () => 'ok');
    await engine.client.syncRegistry(engine.registry, { owner: 'app' });
    await expect(schedules.upsert('x', { workflow: 'report', every: '1m', overlap: 'queue' as never })).rejects.toThrow(
      "overlap of schedule \"x\" must be 'skip', 'allow', 'cancel-previous' or 'buffer-one', got \"queue\".",
    );
    await expect(schedules.upsert('x', { workflow: 'report', every: '1m', missedLimit: 5 })).rejects.toThrow(
      'missedLimit of schedule "x" applies to missed: \'all\' only',
    );
    await expect(schedules.pause('nope')).rejects.toThrow(ConfigurationError);
    await expect(schedules.trigger('nope')).rejects.toThrow('There is no schedule "nope"');
    expect(() => engine.define('bad', { cron: [{ expression: '* * * * *', missed: 'twice' as never }] }, () => 'ok')).toThrow(
      "missed of cron trigger \"bad#0\" of workflow \"bad\" must be 'skip', 'once' or 'all'",
    );
  });
});
