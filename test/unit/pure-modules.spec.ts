import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { ConfigurationError, CorruptRunDataError, InvalidCronError, NonRetriableError, RetryAfterError } from '../../lib/core';
import { cronIds, decodeCron, encodeCron, nextCronTick, triggerSchedule } from '../../lib/core/definition/cron';
import { dueAt, idempotencyTtlSec, timeOption, toMs } from '../../lib/core/definition/duration';
import { MAX_DURATION_MS, parseDurationMs } from '../../lib/core/definition/duration-format';
import { defaultRetryDelayMs, nextAttemptAt } from '../../lib/core/definition/retry';
import { checkTraceContext, MAX_TRACESTATE_CHARS } from '../../lib/core/definition/tracing';
import { WorkflowRegistry } from '../../lib/core/definition/workflow';
import type { RunInfo } from '../../lib/core/definition/workflow-types';
import { RedflowKeys } from '../../lib/core/store/keys';
import { parseRun, readTraceContext, summarizeRun, traceFields } from '../../lib/core/store/run-record';
import {
  decodeStepRecord,
  encodeFailureRecord,
  encodeSleepRecord,
  encodeSuccessRecord,
  encodeTriesRecord,
  parseStepRecord,
  parseTriesRecord,
} from '../../lib/core/store/step-record';

/** The pure modules of the engine: no Redis, no timers. `npm run test:unit` runs these alone. */

describe('durations', () => {
  it('reads numbers of ms and strings with a unit, and nothing else', () => {
    expect([toMs(0), toMs(250), toMs('500ms'), toMs('5s'), toMs('1.5m'), toMs('2h'), toMs('1d'), toMs(' 3 s ')]).toEqual([
      0, 250, 500, 5_000, 90_000, 7_200_000, 86_400_000, 3_000,
    ]);
    expect(toMs(0.2)).toBe(1); // rounded up: a positive duration never becomes 0
    for (const bad of ['abc', '5', '5 sec', '-1s', -1, NaN, Infinity, 11 * 365 * 86_400_000]) {
      expect(() => toMs(bad as number)).toThrow(ConfigurationError);
    }
    expect(() => toMs('5x', 'retries.delay')).toThrow(
      'retries.delay must be a duration >= 0 and at most 10 years (a number of ms or a string like "5s"), got "5x".',
    );
    expect([parseDurationMs('2s'), parseDurationMs(7), parseDurationMs({}), parseDurationMs('2 weeks')]).toEqual([2000, 7, NaN, NaN]);
    expect(MAX_DURATION_MS).toBe(10 * 365 * 86_400_000);
  });

  it('turns delays and dates into due times, and checks idempotency TTLs', () => {
    expect(dueAt('1s', 1_000)).toBe(2_000);
    expect(dueAt(new Date(5_000), 1_000)).toBe(5_000);
    expect(() => dueAt(new Date(Number.NaN), 0)).toThrow(ConfigurationError);
    expect(timeOption(undefined, 'runAt')).toBe(0);
    expect(timeOption(new Date(42), 'runAt')).toBe(42);
    expect(idempotencyTtlSec(undefined, 'start options')).toBe(7 * 24 * 3600);
    expect(idempotencyTtlSec({ idempotencyWindow: '1d' }, 'start options')).toBe(24 * 3600);
    // Redis keeps keys for whole seconds: a part of a second is kept for the whole one.
    expect(idempotencyTtlSec({ idempotencyWindow: 1_500 }, 'start options')).toBe(2);
    // The deprecated name counts seconds, as it always did.
    expect(idempotencyTtlSec({ idempotencyTtl: 60 }, 'start options')).toBe(60);
    expect(() => idempotencyTtlSec({ idempotencyWindow: 0 }, 'start options')).toThrow('idempotencyWindow of start options must be a duration > 0');
    expect(() => idempotencyTtlSec({ idempotencyTtl: '1d' as never }, 'start options')).toThrow(
      'idempotencyTtl of start options must be a number, got "1d"; or use idempotencyWindow of start options, which takes a duration such as \'7d\'.',
    );
    expect(() => idempotencyTtlSec({ idempotencyWindow: '1d', idempotencyTtl: 60 }, 'start options')).toThrow(
      'idempotencyWindow of start options and idempotencyTtl of start options are the same option',
    );
  });
});

describe('retry policy', () => {
  const run = (attempt: number, maxAttempts = 5): RunInfo => ({ id: 'r1', workflow: 'w', attempt, maxAttempts }) as RunInfo;

  it('backs off 250 ms doubling per attempt up to 30 s, plus under 100 ms of jitter', () => {
    for (const [attempt, base] of [
      [1, 250],
      [2, 500],
      [3, 1_000],
      [8, 30_000],
      [20, 30_000],
    ]) {
      for (let i = 0; i < 20; i++) {
        const delay = defaultRetryDelayMs(attempt);
        expect(delay).toBeGreaterThanOrEqual(base);
        expect(delay).toBeLessThan(base + 100);
      }
    }
  });

  it('fails for good after the last attempt, on a permanent error, or when shouldRetry says no', () => {
    expect(nextAttemptAt(undefined, run(5, 5), new Error('x'), 0)).toBeNull();
    expect(nextAttemptAt(undefined, run(1), new NonRetriableError('card declined'), 0)).toBeNull();
    expect(nextAttemptAt({ shouldRetry: () => false }, run(1), new Error('x'), 0)).toBeNull();
  });

  it('schedules the next attempt by RetryAfterError, a fixed delay, a delay function or the default', () => {
    expect(nextAttemptAt({ delay: '1m' }, run(1), new RetryAfterError('busy', 5_000), 1_000)).toBe(6_000);
    expect(nextAttemptAt({ delay: '2s' }, run(1), new Error('x'), 1_000)).toBe(3_000);
    expect(nextAttemptAt({ delay: ({ run: info }) => info.attempt * 100 }, run(3), new Error('x'), 1_000)).toBe(1_300);
    const fallback = nextAttemptAt(undefined, run(2), new Error('x'), 1_000)!;
    expect(fallback - 1_000).toBeGreaterThanOrEqual(500);
    expect(fallback - 1_000).toBeLessThan(600);
    expect(() => nextAttemptAt({ delay: () => -5 }, run(1), new Error('x'), 0)).toThrow('retries.delay of workflow "w"');
  });
});

describe('keys', () => {
  const keys = new RedflowKeys('shop');

  it('puts every key of a prefix in the hash tag {prefix}', () => {
    expect(keys.base).toBe('{shop}:');
    expect([keys.run('r1'), keys.ready('q'), keys.status('failed'), keys.workflowStatusRuns('failed', 'a:b'), keys.idempotency('w', 'k|1')]).toEqual([
      '{shop}:run:r1',
      '{shop}:q:q:ready',
      '{shop}:status:failed',
      '{shop}:wfstatus:failed:a:b',
      '{shop}:idem:w|k|1',
    ]);
  });

  it('finds the runs index of every workflow, and only those, and reads the workflow back from its key', () => {
    const glob = (pattern: string) => new RegExp(`^${keys.base.replace(/[{}]/g, '\\$&')}${pattern.replace(/\*/g, '.*')}$`);
    const pattern = glob(keys.workflowRunsPattern());
    const names = ['checkout', 'a:b', 'x:runs', 'y:active', 'p|q'];
    for (const name of names) {
      expect(pattern.test(keys.workflowRuns(name))).toBe(true);
      expect(keys.workflowOfRuns(keys.workflowRuns(name))).toBe(name);
      for (const other of [keys.active(name), keys.parked(name), keys.workflowStatusRuns('failed', name), keys.workflow(name)]) {
        expect([other, pattern.test(other)]).toEqual([other, false]);
      }
    }
    expect(keys.workflowOfRuns('{shop}:wf::runs')).toBeUndefined();
    expect(keys.workflowOfRuns('{other}:wf:a:runs')).toBeUndefined();
    expect(keys.workflowOfRuns(keys.workflowStatusRuns('failed', 'a:runs'))).toBeUndefined();
  });

  it('builds the same keys as the Lua scripts, for every key shape a script builds, and no script builds one inline', () => {
    const lua = readFileSync(join(__dirname, '..', '..', 'lib', 'core', 'store', 'scripts', 'includes', 'keys.lua'), 'utf8');
    const twins: Record<string, (...args: string[]) => string> = {
      k_run: (id) => keys.run(id),
      k_ready: (q) => keys.ready(q),
      k_scheduled: (q) => keys.scheduled(q),
      k_priority: (q) => keys.priority(q),
      k_priority_last: () => keys.priorityLast(),
      k_group_runs: (g) => keys.groupRuns(g),
      k_group_active: (g) => keys.groupActive(g),
      k_groups: () => keys.groups(),
      k_batch: (g) => keys.batch(g),
      k_batches_due: () => keys.batchesDue(),
      k_batch_first: () => keys.batchFirst(),
      k_status: (s) => keys.status(s),
      k_meta: (w) => keys.workflow(w),
      k_active: (w) => keys.active(w),
      k_parked: (w) => keys.parked(w),
      k_mutex: (k) => keys.mutex(k),
      k_mutex_parked: (k) => keys.mutexParked(k),
      k_children: (id) => keys.children(id),
      k_waiters: (id) => keys.waiters(id),
      k_workflow_runs: (w) => keys.workflowRuns(w),
      k_workflow_names: () => keys.workflowNames(),
      k_workflow_status: (s, w) => keys.workflowStatusRuns(s, w),
      k_waiting: (kind) => keys.waiting(kind),
      k_waiting_for: (kind, name) => keys.waiting(kind, name),
      k_workflow_versions: (w) => keys.workflowVersions(w),
      k_workers: () => keys.workers(),
      k_idempotency: (w, k) => keys.idempotency(w, k),
      k_event_subs: (e) => keys.eventSubscribers(e),
      k_event_data: (e) => keys.eventData(e),
      k_debounce: (w, k) => keys.debounce(w, k),
      k_throttle: (k) => keys.throttle(k),
      k_ratelimit: (k) => keys.rateLimit(k),
      k_event_idempotency: (e, k) => keys.eventIdempotency(e, k),
      k_events_due: () => keys.eventsDue(),
      k_write_check: () => keys.writeCheck(),
      k_signals: (id) => keys.signals(id),
      k_event_wait: (e, h) => keys.eventWait(e, h),
      k_event_shapes: (e) => keys.eventShapes(e),
      k_event_waits_of: (id) => keys.eventWaitsOf(id),
      k_leases: () => keys.leases(),
      k_comp_leases: () => keys.compensationLeases(),
      k_events: () => keys.events(),
      k_cancel_channel: () => keys.cancelChannel(),
      k_ended_channel: () => keys.endedChannel(),
      k_cron_defs: () => keys.cronDefs(),
      k_cron_last: () => keys.cronLast(),
      k_cron_buffered: () => keys.cronBuffered(),
      k_cron_paused: () => keys.cronPaused(),
      k_queues_paused: () => keys.queuesPaused(),
      k_cron_count: () => keys.cronCount(),
    };
    const functions = [...lua.matchAll(/^local function (k_\w+)\(base(?:, )?([\w, ]*)\) return (.+) end$/gm)];
    expect(functions.map(([, name]) => name).sort()).toEqual(Object.keys(twins).sort());
    for (const [, name, params, body] of functions) {
      const args = params ? params.split(', ') : [];
      // A Lua concatenation of quoted strings and parameters is a JavaScript one with "+".
      const luaKey = new Function('base', ...args, `return ${body.replace(/\.\./g, '+')};`) as (...a: string[]) => string;
      const values = args.map((_, i) => `v${i}:x|y`);
      expect([name, luaKey(keys.base, ...values)]).toEqual([name, twins[name](...values)]);
    }
    const dir = join(__dirname, '..', '..', 'lib', 'core', 'store', 'scripts');
    const files = [...readdirSync(dir).filter((f) => f.endsWith('.lua')), ...readdirSync(join(dir, 'includes')).map((f) => `includes/${f}`)];
    const inline = files.filter((f) => f !== 'includes/keys.lua' && /base \.\. '/.test(readFileSync(join(dir, f), 'utf8').replace(/--[^\n]*/g, '')));
    expect(inline).toEqual([]);
  });
});

describe('cron triggers', () => {
  const registry = new WorkflowRegistry();
  const report = registry.define(
    'report',
    {
      cron: [
        { expression: '0 3 * * *', timezone: 'UTC' },
        { id: 'hourly', expression: '0 * * * *', input: { scope: 'all' } },
      ],
    },
    () => 1,
  );

  it('names triggers by id or by position, and finds the next tick in the trigger time zone', () => {
    expect(cronIds(report)).toEqual(['report#0', 'hourly']);
    const after = Date.UTC(2026, 11, 5, 8, 30);
    expect(nextCronTick('report', { expression: '0 3 * * *', timezone: 'UTC' }, after)).toBe(Date.UTC(2026, 11, 6, 3, 0));
    expect(nextCronTick('report', { expression: '0 3 * * *', timezone: 'Asia/Tokyo' }, after)).toBe(Date.UTC(2026, 11, 5, 18, 0));
    expect(() => nextCronTick('report', { expression: '61 * * * *' }, after)).toThrow(InvalidCronError);
    expect(() => nextCronTick('report', { expression: '0 3 * * *', timezone: 'Mars/Olympus' }, after)).toThrow(
      'with time zone "Mars/Olympus" of workflow "report" is invalid',
    );
  });

  it('stores a trigger as one JSON shape and reads it back', () => {
    const trigger = (i: number) => ({ ...triggerSchedule(report.options.cron![i]), input: report.options.cron![i].input });
    const stored = encodeCron('report', trigger(1));
    expect(JSON.parse(stored)).toEqual({ workflow: 'report', expression: '0 * * * *', timezone: null, input: { scope: 'all' } });
    expect(decodeCron(stored)).toEqual({ workflow: 'report', expression: '0 * * * *', timezone: null, input: { scope: 'all' } });
    expect(decodeCron(encodeCron('report', trigger(0)))).toEqual({ workflow: 'report', expression: '0 3 * * *', timezone: 'UTC', input: null });
  });
});

describe('step records', () => {
  it('encodes each kind of record and reads it back as a step state', () => {
    expect(parseStepRecord('r', 's:charge', encodeSuccessRecord(1, 2, 5_000, 40, '{"id":"ch_1"}'))).toEqual({
      name: 'charge',
      seq: 1,
      attempt: 2,
      status: 'succeeded',
      startedAt: 4_960,
      finishedAt: 5_000,
      output: { id: 'ch_1' },
      attempts: 1,
    });
    expect(parseStepRecord('r', 's:noop', encodeSuccessRecord(2, 1, 10, 0, ''))).toEqual({
      name: 'noop',
      seq: 2,
      attempt: 1,
      status: 'succeeded',
      startedAt: 10,
      finishedAt: 10,
      attempts: 1,
    });
    expect(parseStepRecord('r', 's:send#2', encodeFailureRecord(3, 1, 100, 7, '{"name":"Error","message":"smtp down"}'))).toEqual({
      name: 'send#2',
      seq: 3,
      attempt: 1,
      status: 'failed',
      startedAt: 93,
      finishedAt: 100,
      error: { name: 'Error', message: 'smtp down' },
      attempts: 1,
    });
    const future = Date.now() + 60_000;
    expect(parseStepRecord('r', 's:nap', encodeSleepRecord(4, 1, future, 500))).toEqual({
      name: 'nap',
      seq: 4,
      attempt: 1,
      status: 'waiting',
      wakeAt: future,
      startedAt: 500,
    });
    // A sleep that is over lasted from when it began to its wake time.
    expect(parseStepRecord('r', 's:nap', encodeSleepRecord(4, 1, 1_000, 800))).toMatchObject({
      status: 'succeeded',
      wakeAt: 1_000,
      startedAt: 800,
      finishedAt: 1_000,
    });
    // Records written before a wait kept its start still read, without a start.
    expect(parseStepRecord('r', 's:nap', '[2,4,1,1000]')).toEqual({ name: 'nap', seq: 4, attempt: 1, status: 'succeeded', wakeAt: 1_000 });
    expect(parseStepRecord('r', 's:kid', '[3,5,1,"r.kid",0]')).toEqual({ name: 'kid', seq: 5, attempt: 1, status: 'waiting', childRunId: 'r.kid' });
    expect(parseStepRecord('r', 's:kid', '[3,5,1,"r.kid",0,700]')).toEqual({
      name: 'kid',
      seq: 5,
      attempt: 1,
      status: 'waiting',
      childRunId: 'r.kid',
      startedAt: 700,
    });
  });

  it("a tries record keeps the step's last 20 tries; one written before tries were kept still reads", () => {
    const error = '{"name":"Error","message":"down"}';
    const many = Array.from({ length: 25 }, (_, i) => ({
      startedAt: i * 10,
      finishedAt: i * 10 + 5,
      attempt: 1,
      error: { name: 'Error', message: `try ${i + 1}` },
    }));
    const record = encodeTriesRecord({ failures: 25, runAttempt: 1, failuresInRunAttempt: 25, retryAt: 0 }, error, many);
    const parsed = parseTriesRecord('r', 't:x', record);
    expect(parsed.tries).toHaveLength(20);
    expect(parsed.tries[0]).toEqual({ startedAt: 50, finishedAt: 55, attempt: 1, error: { name: 'Error', message: 'try 6' } });
    const old = `[2,1,2,0,${error}]`;
    expect(parseTriesRecord('r', 't:x', old)).toMatchObject({ failures: 2, tries: [] });
    expect(parseStepRecord('r', 's:x', encodeSuccessRecord(3, 1, 5_000, 40, '1'), old)).not.toHaveProperty('tries');
    expect(() => parseTriesRecord('r', 't:x', `[2,1,2,0,${error},[[1,"x",1]]]`)).toThrow(CorruptRunDataError);
  });

  it('counts the tries of a step that failed before, and shows its last error and next retry', () => {
    const error = '{"name":"Error","message":"card declined"}';
    const list = [
      { startedAt: 10, finishedAt: 20, attempt: 1, error: { name: 'Error', message: 'card declined' } },
      { startedAt: 30, finishedAt: 40, attempt: 1, error: { name: 'Error', message: 'card declined' } },
    ];
    const tries = encodeTriesRecord({ failures: 2, runAttempt: 1, failuresInRunAttempt: 2, retryAt: 9_000 }, error, list);
    expect(parseTriesRecord('r', 't:charge', tries)).toEqual({
      failures: 2,
      runAttempt: 1,
      failuresInRunAttempt: 2,
      retryAt: 9_000,
      lastError: JSON.parse(error),
      tries: list,
    });
    expect(parseStepRecord('r', 's:charge', encodeSuccessRecord(3, 1, 5_000, 40, '1'), tries)).toMatchObject({
      status: 'succeeded',
      attempts: 3,
      lastError: { message: 'card declined' },
      tries: list,
    });
    expect(parseStepRecord('r', 's:charge', encodeFailureRecord(3, 1, 5_000, 40, error), tries)).toMatchObject({
      status: 'failed',
      attempts: 2,
      retryAt: 9_000,
    });
    expect(() => parseTriesRecord('r', 't:charge', '[1,2]')).toThrow('field "t:charge" is not a step tries record');
  });

  it('refuses a record that is not one, naming the run and the field', () => {
    expect(() => parseStepRecord('r9', 's:x', '[9,1,1,0]')).toThrow(CorruptRunDataError);
    expect(() => parseStepRecord('r9', 's:x', '{"a":1}')).toThrow('field "s:x" (step "x") is not a step record');
    expect(() => parseStepRecord('r9', 's:x', 'not json')).toThrow(CorruptRunDataError);
  });

  it('decodes each kind of record for replay, with the deadline of a wait 0 when it has none', () => {
    expect(decodeStepRecord('r', 's:a', encodeSuccessRecord(1, 2, 5_000, 40, '{"id":"ch_1"}'))).toEqual({
      kind: 'succeeded',
      seq: 1,
      attempt: 2,
      finishedAt: 5_000,
      durationMs: 40,
      output: { id: 'ch_1' },
    });
    expect(decodeStepRecord('r', 's:a', encodeSuccessRecord(1, 2, 5_000, 40, ''))).toEqual({
      kind: 'succeeded',
      seq: 1,
      attempt: 2,
      finishedAt: 5_000,
      durationMs: 40,
      output: undefined,
    });
    expect(decodeStepRecord('r', 's:a', encodeFailureRecord(1, 1, 9, 2, '{"name":"Error","message":"x"}'))).toEqual({
      kind: 'failed',
      seq: 1,
      attempt: 1,
      finishedAt: 9,
      durationMs: 2,
      error: { name: 'Error', message: 'x' },
    });
    expect(decodeStepRecord('r', 's:a', encodeSleepRecord(2, 1, 77, 7))).toEqual({ kind: 'sleeping', seq: 2, attempt: 1, wakeAt: 77, began: 7 });
    expect(decodeStepRecord('r', 's:a', '[4,5,1,"approve",900,800]')).toEqual({
      kind: 'signal',
      seq: 5,
      attempt: 1,
      signal: 'approve',
      deadline: 900,
      began: 800,
    });
    expect(decodeStepRecord('r', 's:a', '[5,5,1,"paid",0,{},800]')).toMatchObject({ kind: 'event', began: 800 });
    expect(decodeStepRecord('r', 's:a', '[3,5,1,"r.kid",0]')).toEqual({ kind: 'child', seq: 5, attempt: 1, childRunId: 'r.kid', deadline: 0 });
    expect(decodeStepRecord('r', 's:a', '[4,5,1,"approve",900]')).toEqual({ kind: 'signal', seq: 5, attempt: 1, signal: 'approve', deadline: 900 });
    expect(decodeStepRecord('r', 's:a', '[5,5,1,"paid",0,{"order":1}]')).toEqual({
      kind: 'event',
      seq: 5,
      attempt: 1,
      event: 'paid',
      deadline: 0,
      match: { order: 1 },
    });
  });

  it.each([
    ['an unknown kind', '[9,1,1,0]'],
    ['an object', '{"a":1}'],
    ['a seq that is not a number', '[1,"1",1,0,0]'],
    ['a success without its duration', '[1,1,1,0]'],
    ['a failure without its error', '[0,1,1,0,0]'],
    ['a sleep without its wake time', '[2,1,1,"soon"]'],
    ['a child wait whose child id is not a string', '[3,1,1,7,0]'],
    ['a signal wait whose deadline is not a number', '[4,1,1,"approve","x"]'],
    ['an event wait whose match is not an object', '[5,1,1,"paid",0,[1]]'],
    ['text that is not JSON', '[5,1,'],
  ])('refuses %s for replay with CorruptRunDataError naming the run, the field and the step', (_, text) => {
    expect(() => decodeStepRecord('r9', 's:pay', text)).toThrow(CorruptRunDataError);
    expect(() => decodeStepRecord('r9', 's:pay', text)).toThrow(
      /^Run "r9" has corrupt data in Redis \(field "s:pay" \(step "pay"\) is not (a step record|valid JSON)\)/,
    );
  });
});

describe('run records', () => {
  const stored = {
    workflow: 'w',
    queue: 'default',
    status: 'failed',
    input: '{"n":1}',
    error: '{"name":"Error","message":"boom"}',
    attempt: '2',
    maxAttempts: '3',
    createdAt: '100',
    availableAt: '100',
    startedAt: '150',
    finishedAt: '175',
  };

  it('reads a run hash strictly: an unknown status or a field that is not a number is CorruptRunDataError', () => {
    expect(parseRun('r1', stored)).toEqual({
      id: 'r1',
      workflow: 'w',
      queue: 'default',
      version: 1,
      status: 'failed',
      input: { n: 1 },
      error: { name: 'Error', message: 'boom' },
      attempt: 2,
      maxAttempts: 3,
      createdAt: 100,
      availableAt: 100,
      startedAt: 150,
      finishedAt: 175,
    });
    expect(() => parseRun('r1', { ...stored, status: 'done' })).toThrow('field "status" has the unknown value "done"');
    expect(() => parseRun('r1', { ...stored, attempt: 'two' })).toThrow('field "attempt" is not a number');
    expect(() => parseRun('r1', { ...stored, workflow: null })).toThrow(CorruptRunDataError);
  });

  it('reads a list row leniently: what can be read, and what is wrong in `corrupt`', () => {
    const fields = {
      workflow: 'w',
      queue: 'default',
      status: 'failed',
      attempt: '2',
      maxAttempts: '3',
      createdAt: '100',
      availableAt: '100',
      startedAt: '150',
      finishedAt: '175',
      parent: null,
      error: stored.error,
    };
    expect(summarizeRun('r1', fields)).toEqual({
      id: 'r1',
      workflow: 'w',
      queue: 'default',
      version: 1,
      status: 'failed',
      attempt: 2,
      maxAttempts: 3,
      createdAt: 100,
      availableAt: 100,
      startedAt: 150,
      finishedAt: 175,
      durationMs: 25,
      error: { name: 'Error', message: 'boom' },
    });
    expect(summarizeRun('r1', { ...fields, status: 'done', attempt: 'x' }, 'failed')).toMatchObject({
      id: 'r1',
      status: 'failed',
      corrupt: 'field "status" has the unknown value "done"; field "attempt" is not a number',
    });
  });
});

describe('trace context check', () => {
  const parent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';

  it('keeps a version-00 traceparent with non-zero ids, and a short printable tracestate', () => {
    expect(checkTraceContext({ traceparent: parent })).toEqual({ traceparent: parent });
    expect(checkTraceContext({ traceparent: parent, tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7' })).toEqual({
      traceparent: parent,
      tracestate: 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7',
    });
    expect(checkTraceContext({ traceparent: parent, tracestate: 'a'.repeat(MAX_TRACESTATE_CHARS) })?.tracestate).toHaveLength(512);
  });

  it('drops a malformed or oversized traceparent, and a tracestate that is too long or not printable ASCII', () => {
    for (const traceparent of [
      '',
      parent.toUpperCase(),
      parent.replace(/^00/, '01'),
      parent.replace('0af7651916cd43dd8448eb211c80319c', '0'.repeat(32)),
      parent.replace('b7ad6b7169203331', '0'.repeat(16)),
      `${parent}-extra`,
      `${parent}\n`,
      'x'.repeat(100_000),
    ]) {
      expect([traceparent.slice(0, 60), checkTraceContext({ traceparent })]).toEqual([traceparent.slice(0, 60), undefined]);
    }
    for (const value of [undefined, null, 'a string', 42, { traceparent: 7 }]) expect(checkTraceContext(value)).toBeUndefined();
    expect(checkTraceContext({ traceparent: parent, tracestate: 'a'.repeat(MAX_TRACESTATE_CHARS + 1) })).toEqual({ traceparent: parent });
    expect(checkTraceContext({ traceparent: parent, tracestate: 'k=v\r\nx-injected: 1' })).toEqual({ traceparent: parent });
    expect(checkTraceContext({ traceparent: parent, tracestate: 'k=é' })).toEqual({ traceparent: parent });
  });

  it('reads the stored fields of a run hash back, checked again', () => {
    expect(traceFields({ traceparent: parent })).toEqual(['traceparent', parent]);
    expect(traceFields({ traceparent: parent, tracestate: 'k=v' })).toEqual(['traceparent', parent, 'tracestate', 'k=v']);
    expect(readTraceContext({ traceparent: parent, tracestate: 'k=v' })).toEqual({ traceparent: parent, tracestate: 'k=v' });
    expect(readTraceContext({ workflow: 'w' })).toBeUndefined();
    expect(readTraceContext({ traceparent: 'edited by hand' })).toBeUndefined();
  });
});
