import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import request from 'supertest';

import {
  aesGcmCodec,
  NonRetriableError,
  type CronState,
  type RedflowLogger,
  type RunState,
  type StepState,
  type WorkflowContext,
  type WorkflowMeta,
} from '../../lib';
import { clusterMode, eventually, TestEngine } from '../support/engine';
import { OwnRedis } from '../support/own-redis';

/**
 * The `redflow` command as users run it: a child process on the test Redis, under a TestEngine's
 * prefix with registered workflows and seeded runs. The CLI speaks to a standalone Redis only.
 */

const ROOT = join(__dirname, '..', '..');
const CLI = join(ROOT, 'lib', 'cli', 'redflow.ts');
const silent: RedflowLogger = { log() {}, warn() {}, error() {} };
const STACK_LINE = /^\s+at /m;

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a CLI process: no REDIS_URL / REDFLOW_PREFIX / REDFLOW_DASHBOARD_TOKEN unless a test sets them. */
function cliEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const name of ['REDIS_URL', 'REDFLOW_PREFIX', 'REDFLOW_DASHBOARD_TOKEN'] as const) if (!(name in env)) delete childEnv[name];
  return childEnv;
}

function start(args: string[], env: Record<string, string> = {}): ChildProcess {
  return spawn(process.execPath, ['-r', '@swc-node/register', CLI, ...args], { cwd: ROOT, env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
}

/** Runs `redflow <args>` to completion. */
function run(args: string[], env: Record<string, string> = {}): Promise<Result> {
  const proc = start(args, env);
  const result: Result = { code: null, stdout: '', stderr: '' };
  proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => (result.stdout += chunk));
  proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (result.stderr += chunk));
  return new Promise((resolve, reject) => {
    proc.once('error', reject);
    proc.once('close', (code) => resolve({ ...result, code }));
  });
}

const lines = (text: string) => text.replace(/\n$/, '').split('\n');
const cells = (line: string) => line.trim().split(/\s{2,}/);

(clusterMode ? describe.skip : describe)('redflow CLI', () => {
  let engine: TestEngine;
  let common: string[];
  const ids = {} as { greet: string; explode: string; parked: string[] };

  /** `redflow <args> --redis <test redis> --prefix <engine prefix>`. */
  const redflow = (...args: string[]) => run([...args, ...common]);
  const json = <T>(result: Result): T => {
    expect(result).toMatchObject({ code: 0, stderr: '' });
    return JSON.parse(result.stdout) as T;
  };

  beforeAll(async () => {
    engine = new TestEngine();
    common = ['--redis', process.env.REDFLOW_TEST_REDIS_URL!, '--prefix', engine.prefix];
    const { registry, client } = engine;
    const greet = registry.define(
      'greet',
      { maxConcurrency: Infinity, event: [{ name: 'user.signed-up' }] },
      async ({ input, step }: WorkflowContext<{ name: string }>) => {
        const text = await step.run('compose', () => `Hello ${input.name}`);
        await step.setProgress({ phase: 'composed' });
        return text;
      },
    );
    const explode = registry.define('explode', { retries: { maxAttempts: 2, delay: 10 } }, () => {
      throw new Error('kaboom');
    });
    const parked = registry.define('parked-job', { queue: 'parked' }, () => 'never runs');
    registry.define('nightly', { queue: 'parked', cron: [{ expression: '0 3 * * *' }] }, () => 'tick');
    await engine.worker({ queues: ['default'], logger: silent }); // registers the workflows in Redis

    const greeting = await client.start(greet, { name: 'Ada' });
    await greeting.result({ timeoutMs: 5000 });
    ids.greet = greeting.id;
    const failing = await client.start(explode, { order: 7 });
    await expect(failing.result({ timeoutMs: 5000 })).rejects.toThrow('kaboom');
    ids.explode = failing.id;
    ids.parked = [];
    for (let i = 0; i < 3; i++) {
      await new Promise((resolve) => setTimeout(resolve, 3));
      ids.parked.push((await client.start(parked, { i })).id);
    }
  });
  afterAll(() => engine?.close());

  it('workflows: a table with a header line and a row per registered workflow', async () => {
    const result = await redflow('workflows');
    expect(result).toMatchObject({ code: 0, stderr: '' });
    const [header, rule, ...rows] = lines(result.stdout);
    expect(cells(header)).toEqual(['name', 'queue', 'maxAttempts', 'maxConcurrency', 'events', 'crons', 'owner']);
    expect(rule).toMatch(/^-+( {2}-+)+$/);
    expect(rows.map((r) => r.split(' ')[0])).toEqual(['explode', 'greet', 'nightly', 'parked-job']);
    const row = (name: string) => rows.find((r) => r.startsWith(`${name} `))!;
    expect(cells(row('greet'))).toEqual(['greet', 'default', '1', 'unlimited', 'user.signed-up', 'test-app']);
    expect(cells(row('explode'))).toEqual(['explode', 'default', '2', 'unlimited', 'test-app']);
    expect(cells(row('nightly'))).toEqual(['nightly', 'parked', '1', 'unlimited', 'nightly#0', 'test-app']);
    // Columns line up under their headers.
    expect(row('greet').indexOf('user.signed-up')).toBe(header.indexOf('events'));
    expect(row('nightly').indexOf('nightly#0')).toBe(header.indexOf('crons'));
    expect(row('greet').indexOf('test-app')).toBe(header.indexOf('owner'));
  });

  it('workflows --json, also with REDIS_URL and REDFLOW_PREFIX from the environment', async () => {
    const [flags, fromEnv] = await Promise.all([
      redflow('workflows', '--json'),
      run(['workflows', '--json'], { REDIS_URL: process.env.REDFLOW_TEST_REDIS_URL!, REDFLOW_PREFIX: engine.prefix }),
    ]);
    const workflows = json<WorkflowMeta[]>(flags);
    expect(workflows.map((w) => w.name)).toEqual(['explode', 'greet', 'nightly', 'parked-job']);
    const byName = Object.fromEntries(workflows.map((w) => [w.name, w]));
    expect(byName.greet).toEqual({
      name: 'greet',
      queue: 'default',
      maxAttempts: 1,
      maxConcurrency: null,
      events: ['user.signed-up'],
      crons: [],
      owner: 'test-app',
      updatedAt: expect.any(Number),
      version: 1,
      versions: [{ version: 1, workers: [expect.any(String)], updatedAt: expect.any(Number) }],
    });
    expect(byName.explode).toMatchObject({ queue: 'default', maxAttempts: 2, maxConcurrency: null, events: [], crons: [] });
    expect(byName['parked-job']).toMatchObject({ queue: 'parked' });
    expect(byName.nightly).toMatchObject({ queue: 'parked', crons: ['nightly#0'] });
    // A version's updatedAt is its workers' last heartbeat, which may tick between the two calls.
    const withoutHeartbeat = (list: WorkflowMeta[]) => list.map((w) => ({ ...w, versions: w.versions.map(({ updatedAt: _beat, ...v }) => v) }));
    expect(withoutHeartbeat(json(fromEnv))).toEqual(withoutHeartbeat(workflows));
  });

  it('queues: list shows each queue and whether it is paused; pause with a note, resume; a bad name is one sentence', async () => {
    const own = new TestEngine();
    try {
      own.registry.define('mailer', { queue: 'emails' }, () => 'sent');
      await own.client.syncRegistry(own.registry, { owner: 'cli' });
      await own.client.runByName('mailer', {});
      const cli = (...args: string[]) => run([...args, '--redis', process.env.REDFLOW_TEST_REDIS_URL!, '--prefix', own.prefix]);
      expect(await cli('queues', 'pause', 'emails', '--note', 'provider outage')).toEqual({
        code: 0,
        stderr: '',
        stdout: 'Paused queue emails: workers claim none of its runs until "redflow queues resume emails"; running runs go on.\n',
      });
      expect((await cli('queues', 'pause', 'emails')).stdout).toBe('Queue emails was paused already.\n');
      const [header, , row] = lines((await cli('queues', 'list')).stdout);
      expect(cells(header)).toEqual(['queue', 'queued', 'scheduled', 'running', 'oldest', 'state']);
      expect(cells(row)[0]).toBe('emails');
      expect(cells(row).at(-1)).toBe('paused: provider outage');
      const [listed] = JSON.parse((await cli('queues', 'list', '--json')).stdout) as Array<{ queue: string; queued: number; paused?: { note?: string } }>;
      expect(listed).toMatchObject({ queue: 'emails', queued: 1, paused: { note: 'provider outage' } });
      expect((await cli('queues', 'resume', 'emails')).stdout).toBe('Resumed queue emails: workers claim its runs again within a second.\n');
      expect(cells(lines((await cli('queues', 'list')).stdout)[2]).at(-1)).toBe('active');
      expect(await cli('queues', 'pause', 'two words')).toMatchObject({ code: 1, stdout: '', stderr: expect.stringMatching(/^The queue to pause/) });
      expect(await cli('queues', 'pause')).toMatchObject({
        code: 1,
        stderr: 'Give the queue name (redflow queues list shows them): redflow queues pause <queue>.\n',
      });
    } finally {
      await own.close();
    }
  });

  it('payloads: runs show says "encrypted" without the keys and decodes with them; rotate re-encrypts to the current key; keygen makes a key', async () => {
    const k1 = Buffer.alloc(32, 7).toString('base64');
    const k2 = Buffer.alloc(32, 8).toString('base64');
    const own = new TestEngine({ codec: aesGcmCodec({ keys: { k1 }, current: 'k1' }) });
    try {
      const wf = own.registry.define('secretive', {}, async ({ input, step }) => step.run('keep', () => input));
      await own.worker({ logger: silent });
      const handle = await own.client.start(wf, { card: '4242' });
      await handle.result({ timeout: '5s' });
      const cli = (env: Record<string, string>, ...args: string[]) =>
        run([...args, '--redis', process.env.REDFLOW_TEST_REDIS_URL!, '--prefix', own.prefix], env);
      type Shown = { run: RunState; steps: StepState[] };

      const blind = json<Shown>(await cli({}, 'runs', 'show', handle.id, '--json'));
      expect(blind.run.input).toEqual({ encrypted: 'aes-256-gcm, key "k1"' });
      expect(blind.steps[0].output).toEqual({ encrypted: 'aes-256-gcm, key "k1"' });
      expect(json<Shown>(await cli({ REDFLOW_PAYLOAD_KEYS: `k1:${k1}` }, 'runs', 'show', handle.id, '--json')).run.input).toEqual({ card: '4242' });

      expect(await cli({}, 'payloads', 'rotate')).toMatchObject({
        code: 1,
        stdout: '',
        stderr: expect.stringMatching(/^redflow payloads rotate needs the keys\. Payload keys: REDFLOW_PAYLOAD_KEYS=/),
      });
      const rotated = await cli({ REDFLOW_PAYLOAD_KEYS: `k1:${k1},k2:${k2}` }, 'payloads', 'rotate');
      expect(rotated).toMatchObject({
        code: 0,
        stdout: expect.stringMatching(/^Re-encrypted 3 stored values with the current key \(\d+ keys looked at\)\.\n$/),
      });
      const onlyK2 = json<Shown>(await cli({ REDFLOW_PAYLOAD_KEYS: `k2:${k2}` }, 'runs', 'show', handle.id, '--json'));
      expect(onlyK2.run).toMatchObject({ input: { card: '4242' }, output: { card: '4242' } });
      // A key the environment lacks is named, not shown as garbage.
      const stale = json<Shown>(await cli({ REDFLOW_PAYLOAD_KEYS: `k1:${k1}` }, 'runs', 'show', handle.id, '--json'));
      expect(stale.run.input).toEqual({
        encrypted: 'aes-256-gcm, key "k2"',
        error: expect.stringContaining('encrypted with key "k2", which this codec does not have'),
      });

      const key = await run(['payloads', 'keygen']);
      expect(key).toMatchObject({ code: 0, stderr: '' });
      expect(Buffer.from(key.stdout.trim(), 'base64')).toHaveLength(32);
    } finally {
      await own.close();
    }
  });

  it('schedules: list, pause with a note, resume, trigger and preview, by the ids list shows; an unknown id is one sentence', async () => {
    // A prefix of its own, with no worker: the runs a trigger starts stay queued and list nowhere else.
    const own = new TestEngine();
    try {
      own.registry.define('nightly', { cron: [{ id: 'nightly', expression: '0 3 * * *', timezone: 'UTC', overlap: 'skip' }] }, () => 'tick');
      await own.client.syncRegistry(own.registry, { owner: 'cli' });
      const cli = (...args: string[]) => run([...args, '--redis', process.env.REDFLOW_TEST_REDIS_URL!, '--prefix', own.prefix]);

      const listed = await cli('schedules', 'list');
      expect(listed).toMatchObject({ code: 0, stderr: '' });
      const [header, , row] = lines(listed.stdout);
      expect(cells(header)).toEqual(['id', 'source', 'workflow', 'when', 'timezone', 'next', 'policies', 'state']);
      expect(cells(row)).toEqual(['nightly', 'definition', 'nightly', '0 3 * * *', 'UTC', expect.stringMatching(/T03:00:00\.000Z$/), 'overlap=skip', 'active']);

      expect(await cli('schedules', 'pause', 'nightly', '--note', 'db upgrade')).toMatchObject({
        code: 0,
        stdout: 'Paused schedule nightly: no tick fires until "redflow schedules resume nightly".\n',
      });
      const [paused] = JSON.parse((await cli('schedules', 'list', '--json')).stdout) as CronState[];
      expect(paused).toMatchObject({ id: 'nightly', paused: { note: 'db upgrade' } });
      expect(paused.nextAt).toBeUndefined();
      expect(cells(lines((await cli('schedules', 'list')).stdout)[2]).at(-1)).toBe('paused: db upgrade');
      expect((await cli('schedules', 'resume', 'nightly')).stdout).toMatch(/^Resumed schedule nightly: next tick \d{4}-\d\d-\d\dT03:00:00\.000Z\.\n$/);

      const preview = await cli('schedules', 'preview', 'nightly', '--count', '2');
      expect(lines(preview.stdout)).toEqual([expect.stringMatching(/T03:00:00\.000Z$/), expect.stringMatching(/T03:00:00\.000Z$/)]);
      const [first, second] = lines(preview.stdout).map((t) => Date.parse(t));
      expect(second - first).toBe(86_400_000);

      const fired = await cli('schedules', 'trigger', 'nightly');
      expect(fired.stdout).toMatch(/^Started run cron\.nightly\.\d+ of schedule nightly\.\n$/);
      // Its run is still queued (no worker here): the overlap policy 'skip' starts nothing more.
      expect((await cli('schedules', 'trigger', 'nightly')).stdout).toBe(
        'Started nothing: the previous run of schedule nightly goes on (its overlap policy).\n',
      );

      const unknown = await cli('schedules', 'pause', 'nope');
      expect(unknown).toMatchObject({ code: 1, stdout: '' });
      expect(lines(unknown.stderr)).toEqual([
        'There is no schedule "nope": schedules.list() shows the ids of runtime schedules and of workflows\' cron triggers.',
      ]);
    } finally {
      await own.close();
    }
  });

  it('runs list: a table newest first; --json, --status, --workflow, --limit and --offset', async () => {
    const [table, failed, page, none, badStatus] = await Promise.all([
      redflow('runs', 'list'),
      redflow('runs', 'list', '--status', 'failed', '--json'),
      redflow('runs', 'list', '--workflow', 'parked-job', '--limit', '2', '--offset', '1', '--json'),
      redflow('runs', 'list', '--workflow', 'greet', '--status', 'failed'),
      redflow('runs', 'list', '--status', 'done'),
    ]);
    const newestFirst = [...[...ids.parked].reverse(), ids.explode, ids.greet];

    expect(table).toMatchObject({ code: 0, stderr: '' });
    const [header, , ...rows] = lines(table.stdout);
    expect(cells(header)).toEqual(['id', 'workflow', 'status', 'attempt', 'created', 'finished']);
    expect(rows.map((r) => r.split(' ')[0])).toEqual(newestFirst);
    const explode = (await engine.client.getRun(ids.explode))!;
    expect(cells(rows[3])).toEqual([
      ids.explode,
      'explode',
      'failed',
      '2/2',
      new Date(explode.createdAt).toISOString(),
      new Date(explode.finishedAt!).toISOString(),
    ]);
    expect(cells(rows[0])).toEqual([ids.parked[2], 'parked-job', 'queued', '0/1', expect.stringMatching(/^\d{4}-\d\d-\d\dT/)]);

    const failedRuns = json<RunState[]>(failed);
    expect(failedRuns).toHaveLength(1);
    expect(failedRuns[0]).toMatchObject({
      id: ids.explode,
      workflow: 'explode',
      status: 'failed',
      input: { order: 7 },
      attempt: 2,
      maxAttempts: 2,
      error: { name: 'Error', message: 'kaboom' },
    });
    expect(json<RunState[]>(page).map((r) => r.id)).toEqual([ids.parked[1], ids.parked[0]]);
    expect(none).toEqual({ code: 0, stdout: 'No runs match.\n', stderr: '' });
    expect(badStatus).toEqual({
      code: 1,
      stdout: '',
      stderr: 'Unknown status "done". Use one of scheduled, queued, running, compensating, succeeded, failed, canceled, compensation_failed, terminated.\n',
    });
  });

  it('runs list: --limit abc is a one-line error without a stack trace, and --limit 0 lists nothing', async () => {
    const [notANumber, zero] = await Promise.all([
      redflow('runs', 'list', '--limit', 'abc'),
      redflow('runs', 'list', '--workflow', 'parked-job', '--limit', '0', '--json'),
    ]);
    expect(notANumber.code).toBe(1);
    expect(notANumber.stdout).toBe('');
    expect(notANumber.stderr).not.toMatch(STACK_LINE);
    expect(lines(notANumber.stderr)).toHaveLength(1);
    expect(notANumber.stderr).toContain('--limit');
    expect(json(zero)).toEqual([]);
  });

  it('runs show: the run line, input, output or error, and the steps', async () => {
    const [shown, failed, asJson, missing] = await Promise.all([
      redflow('runs', 'show', ids.greet),
      redflow('runs', 'show', ids.explode),
      redflow('runs', 'show', ids.greet, '--json'),
      redflow('runs', 'show', 'no-such-run'),
    ]);
    const greet = (await engine.client.getRun(ids.greet))!;
    const steps = await engine.client.getRunSteps(ids.greet);

    expect(shown).toMatchObject({ code: 0, stderr: '' });
    const out = lines(shown.stdout);
    expect(out.slice(0, 6)).toEqual([
      `${ids.greet}  greet  succeeded  attempt 1/1`,
      `created ${new Date(greet.createdAt).toISOString()}  finished ${new Date(greet.finishedAt!).toISOString()}`,
      'progress: {"phase":"composed"}',
      'input: {"name":"Ada"}',
      'output: "Hello Ada"',
      '',
    ]);
    expect(cells(out[6])).toEqual(['seq', 'name', 'status', 'attempt', 'tries', 'duration', 'output', 'waits for']);
    expect(cells(out[8])).toEqual(['1', 'compose', 'succeeded', '1', '1', `${steps[0].finishedAt! - steps[0].startedAt!} ms`, '"Hello Ada"']);
    expect(out).toHaveLength(9);

    expect(failed).toMatchObject({ code: 0, stderr: '' });
    expect(lines(failed.stdout)).toEqual([
      `${ids.explode}  explode  failed  attempt 2/2`,
      expect.stringMatching(/^created \S+ {2}finished \S+$/),
      'input: {"order":7}',
      'error: Error: kaboom',
      '',
      'No steps.',
    ]);

    const view = json<{ run: RunState; steps: StepState[] }>(asJson);
    expect(view.run).toMatchObject({ id: ids.greet, workflow: 'greet', status: 'succeeded', output: 'Hello Ada' });
    expect(view.steps).toEqual([expect.objectContaining({ name: 'compose', status: 'succeeded', output: 'Hello Ada', seq: 1 })]);

    expect(missing).toEqual({ code: 1, stdout: '', stderr: `Run "no-such-run" does not exist under prefix "${engine.prefix}".\n` });
  });

  it('runs cancel: cancels a queued run; a second cancel says it already ended; a missing run is one sentence and exit 1', async () => {
    const { id } = await engine.client.runByName('parked-job', { cancel: 'me' });
    const first = await redflow('runs', 'cancel', id);
    expect(first).toEqual({ code: 0, stdout: `Canceled run ${id}.\n`, stderr: '' });
    expect(await engine.client.getRun(id)).toMatchObject({ status: 'canceled', cancelReason: 'canceled from the CLI' });

    expect(await redflow('runs', 'cancel', id)).toEqual({ code: 0, stdout: `Run ${id} was not canceled: it already ended (canceled).\n`, stderr: '' });
    expect(await redflow('runs', 'cancel', 'no-such-run')).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "no-such-run" does not exist under prefix "${engine.prefix}".\n`,
    });

    const other = await engine.client.runByName('parked-job', { cancel: 'with reason' });
    expect(json(await redflow('runs', 'cancel', other.id, '--reason', 'duplicate order', '--json'))).toEqual({ id: other.id, canceled: true });
    expect(await engine.client.getRun(other.id)).toMatchObject({ status: 'canceled', cancelReason: 'duplicate order' });
  });

  it('runs terminate: ends a queued run at once; a second terminate says it already ended; a missing run is one sentence and exit 1', async () => {
    const { id } = await engine.client.runByName('parked-job', { terminate: 'me' });
    expect(await redflow('runs', 'terminate', id)).toEqual({ code: 0, stdout: `Terminated run ${id}.\n`, stderr: '' });
    expect(await engine.client.getRun(id)).toMatchObject({
      status: 'terminated',
      cancelReason: 'terminated from the CLI',
      error: { name: 'RunTerminatedError' },
    });
    expect(await redflow('runs', 'terminate', id)).toEqual({ code: 0, stdout: `Run ${id} was not terminated: it already ended (terminated).\n`, stderr: '' });
    expect(await redflow('runs', 'terminate', 'no-such-run')).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "no-such-run" does not exist under prefix "${engine.prefix}".\n`,
    });
    expect(await redflow('runs', 'terminate')).toEqual({ code: 1, stdout: '', stderr: 'Give the run id: redflow runs terminate <id>.\n' });

    const other = await engine.client.runByName('parked-job', { terminate: 'with reason' });
    expect(json(await redflow('runs', 'terminate', other.id, '--reason', 'stuck on the gateway', '--json'))).toEqual({ id: other.id, terminated: true });
    expect(await engine.client.getRun(other.id)).toMatchObject({ status: 'terminated', cancelReason: 'stuck on the gateway' });
    const listed = await redflow('runs', 'list', '--status', 'terminated', '--json');
    expect(
      json<Array<{ id: string }>>(listed)
        .map((r) => r.id)
        .sort(),
    ).toEqual([id, other.id].sort());
  });

  it('runs delete: deletes an ended run; a live run is refused (exit 1, nothing changed) unless --force; a missing run is one sentence and exit 1', async () => {
    const { id } = await engine.client.runByName('parked-job', { delete: 'me' });
    expect(await redflow('runs', 'delete', id)).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "${id}" is queued: only an ended run can be deleted. Terminate or cancel it first, or pass --force.\n`,
    });
    expect((await engine.client.getRun(id))!.status).toBe('queued');
    expect(json(await redflow('runs', 'delete', id, '--force', '--json'))).toEqual({ id, deleted: true });
    expect(await engine.client.getRun(id)).toBeNull();

    const ended = await engine.client.runByName('parked-job', { delete: 'ended' });
    await engine.client.cancelRun(ended.id);
    expect(await redflow('runs', 'delete', ended.id)).toEqual({ code: 0, stdout: `Deleted run ${ended.id} and everything it stored.\n`, stderr: '' });
    expect(await engine.client.getRun(ended.id)).toBeNull();
    expect(await redflow('runs', 'delete', ended.id)).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "${ended.id}" does not exist under prefix "${engine.prefix}".\n`,
    });
    expect(await redflow('runs', 'delete')).toEqual({ code: 1, stdout: '', stderr: 'Give the run id: redflow runs delete <id> [--force].\n' });
  });

  it('runs resume: queues a canceled run again under its id; a live or missing run is one sentence and exit 1', async () => {
    const { id } = await engine.client.runByName('parked-job', { resume: 'me' });
    await engine.client.cancelRun(id);
    expect(await redflow('runs', 'resume', id)).toEqual({ code: 0, stdout: `Resumed run ${id}: it goes on from its first incomplete step.\n`, stderr: '' });
    expect(await engine.client.getRun(id)).toMatchObject({ status: 'queued', attempt: 0, maxAttempts: 1 });
    expect((await engine.client.getRun(id))?.cancelReason).toBeUndefined();

    expect(await redflow('runs', 'resume', id)).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "${id}" is queued: only a failed, canceled, compensation_failed or terminated run can be resumed.\n`,
    });
    expect(await redflow('runs', 'resume', 'no-such-run')).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "no-such-run" does not exist under prefix "${engine.prefix}".\n`,
    });
    expect(await redflow('runs', 'resume')).toEqual({ code: 1, stdout: '', stderr: 'Give the run id: redflow runs resume <id>.\n' });

    const other = await engine.client.runByName('parked-job', { resume: 'as json' });
    await engine.client.cancelRun(other.id);
    expect(json(await redflow('runs', 'resume', other.id, '--json'))).toEqual({ id: other.id, resumed: true });
    expect((await engine.client.getRun(other.id))!.status).toBe('queued');
  });

  it('runs rerun: starts a new run of a failed or canceled run with its input; a live or missing run is one sentence and exit 1', async () => {
    const rerun = await redflow('runs', 'rerun', ids.explode);
    const [, newId] = /^Re-ran run \S+ as a new run (\S+), with the same input\.\n$/.exec(rerun.stdout) ?? [];
    expect(rerun).toEqual({ code: 0, stdout: `Re-ran run ${ids.explode} as a new run ${newId}, with the same input.\n`, stderr: '' });
    expect(newId).not.toBe(ids.explode);
    expect(await engine.client.getRun(newId)).toMatchObject({ workflow: 'explode', input: { order: 7 } });
    await engine.client
      .handle(newId)
      .result({ timeoutMs: 5000 })
      .catch(() => undefined);

    const { id } = await engine.client.runByName('parked-job', { rerun: 'me' });
    expect(await redflow('runs', 'rerun', id)).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "${id}" is queued: only a failed, canceled or terminated run can be re-run.\n`,
    });
    await engine.client.cancelRun(id);
    const asJson = json<{ id: string; runId: string }>(await redflow('runs', 'rerun', id, '--json'));
    expect(asJson).toEqual({ id, runId: expect.any(String) });
    expect(await engine.client.getRun(asJson.runId)).toMatchObject({ workflow: 'parked-job', status: 'queued', input: { rerun: 'me' } });
    await engine.client.cancelRun(asJson.runId);

    expect(await redflow('runs', 'rerun', 'no-such-run')).toEqual({
      code: 1,
      stdout: '',
      stderr: `Run "no-such-run" does not exist under prefix "${engine.prefix}".\n`,
    });
    expect(await redflow('runs', 'rerun')).toEqual({ code: 1, stdout: '', stderr: 'Give the run id: redflow runs rerun <id>.\n' });
  });

  it('runs list --status compensation_failed and runs show: a run whose compensation failed, with both errors; resumed, it shows compensated', async () => {
    let refundWorks = false;
    const saga = engine.registry.define('cli-saga', {}, async ({ step }) => {
      await step.run(
        {
          name: 'charge',
          compensateRetries: { maxAttempts: 1 },
          compensate: () => {
            if (!refundWorks) throw new Error('the refund was refused');
          },
        },
        () => 'charged',
      );
      throw new NonRetriableError('out of stock');
    });
    const { id } = await engine.client.start(saga, {});
    await eventually(async () => (await engine.client.getRun(id))?.status === 'compensation_failed');
    const listed = await redflow('runs', 'list', '--status', 'compensation_failed');
    expect(listed).toMatchObject({ code: 0, stderr: '' });
    expect(
      lines(listed.stdout)
        .slice(2)
        .map((line) => cells(line).slice(0, 3)),
    ).toEqual([[id, 'cli-saga', 'compensation_failed']]);
    const shown = await redflow('runs', 'show', id);
    expect(shown).toMatchObject({ code: 0, stderr: '' });
    expect(shown.stdout).toContain('error: NonRetriableError: out of stock');
    expect(shown.stdout).toContain('compensation error: Error: the refund was refused');

    refundWorks = true;
    expect(await redflow('runs', 'resume', id)).toMatchObject({ code: 0, stderr: '' });
    await eventually(async () => (await engine.client.getRun(id))?.status === 'failed');
    const after = await redflow('runs', 'show', id);
    expect(after.stdout).toContain('compensated: every compensation of its completed steps ran');
    expect(after.stdout).not.toContain('compensation error');
  });

  it('runs list --waiting finds runs by what they wait for, and runs list and runs show say it', async () => {
    const approval = engine.registry.define('cli-approval', {}, async ({ step }) => step.waitForSignal('approval', 'approve'));
    const nap = engine.registry.define('cli-nap', {}, async ({ step }) => step.sleep('nap', '1h'));
    const waiting = await engine.client.start(approval, {});
    const sleeping = await engine.client.start(nap, {});
    await eventually(async () => (await engine.client.getRun(waiting.id))?.waitingFor && (await engine.client.getRun(sleeping.id))?.waitingFor);
    const wakeAt = (await engine.client.getRun(sleeping.id))!.waitingFor!.until!;

    const [bySignal, byName, byOtherName, bySleep, bad] = await Promise.all([
      redflow('runs', 'list', '--waiting', 'signal'),
      redflow('runs', 'list', '--waiting', 'signal:approve', '--json'),
      redflow('runs', 'list', '--waiting', 'signal:reject'),
      redflow('runs', 'list', '--waiting', 'sleep', '--workflow', 'cli-nap'),
      redflow('runs', 'list', '--waiting', 'timer'),
    ]);
    expect(bySignal).toMatchObject({ code: 0, stderr: '' });
    expect(
      lines(bySignal.stdout)
        .slice(2)
        .map((line) => cells(line).slice(0, 3)),
    ).toEqual([[waiting.id, 'cli-approval', 'scheduled · waiting for signal "approve"']]);
    expect(json<RunState[]>(byName).map((r) => [r.id, r.waitingFor])).toEqual([[waiting.id, { kind: 'signal', name: 'approve' }]]);
    expect(byOtherName).toEqual({ code: 0, stdout: 'No runs match.\n', stderr: '' });
    expect(cells(lines(bySleep.stdout)[2]).slice(0, 3)).toEqual([sleeping.id, 'cli-nap', `scheduled · sleeping until ${new Date(wakeAt).toISOString()}`]);
    expect(bad).toEqual({
      code: 1,
      stdout: '',
      stderr: 'Unknown --waiting "timer". Use one of sleep, signal, event, child, any, signal:<name> or event:<name>.\n',
    });

    const shown = await redflow('runs', 'show', waiting.id);
    expect(shown).toMatchObject({ code: 0, stderr: '' });
    expect(lines(shown.stdout)[0]).toBe(`${waiting.id}  cli-approval  scheduled · waiting for signal "approve"  attempt 1/1`);

    await engine.client.signal(waiting.id, 'approve', 'yes');
    await waiting.result({ timeoutMs: 5_000 });
    await engine.client.cancelRun(sleeping.id);
    expect(await redflow('runs', 'list', '--waiting', 'signal')).toEqual({ code: 0, stdout: 'No runs match.\n', stderr: '' });
    const after = await redflow('runs', 'show', waiting.id);
    expect(lines(after.stdout)[0]).toBe(`${waiting.id}  cli-approval  succeeded  attempt 1/1`);
  });

  it('runs list reads summaries for its table (a run with an unreadable input lists fine); a corrupt run is a row marked corrupt, and one sentence with exit 1 where it must be read whole', async () => {
    const damaged = new TestEngine();
    try {
      damaged.registry.define('idle', { queue: 'parked' }, () => 'never runs');
      await damaged.client.syncRegistry(damaged.registry, { owner: 'test-app' });
      const badInput = (await damaged.client.runByName('idle', { n: 1 })).id;
      const badStatus = (await damaged.client.runByName('idle', { n: 2 })).id;
      await damaged.redis.hset(damaged.client.keys.run(badInput), 'input', '{"huge": not json');
      await damaged.redis.hset(damaged.client.keys.run(badStatus), 'status', 'bogus');
      const here = ['--redis', process.env.REDFLOW_TEST_REDIS_URL!, '--prefix', damaged.prefix];
      const [listed, asJson, shown] = await Promise.all([
        run(['runs', 'list', ...here]),
        run(['runs', 'list', '--json', ...here]),
        run(['runs', 'show', badInput, ...here]),
      ]);

      expect(listed).toMatchObject({ code: 0, stderr: '' });
      const rows = lines(listed.stdout).slice(2).map(cells);
      // Newest first; both runs may carry the same creation ms, so their order is not asserted.
      const byId = (a: string[], b: string[]) => a[0].localeCompare(b[0]);
      expect(rows.map((r) => r.slice(0, 4)).sort(byId)).toEqual(
        [
          [badStatus, 'idle', 'corrupt', '0/1'],
          [badInput, 'idle', 'queued', '0/1'],
        ].sort(byId),
      );
      for (const result of [asJson, shown]) {
        expect(result.code).toBe(1);
        expect(result.stdout).toBe('');
        expect(result.stderr).not.toMatch(STACK_LINE);
        expect(lines(result.stderr)).toHaveLength(1);
      }
      expect(shown.stderr).toBe(
        `Run "${badInput}" has corrupt data in Redis (field "input" is not valid JSON) and cannot be shown; "redflow runs list" shows it as a row marked corrupt.\n`,
      );
      expect(asJson.stderr).toMatch(
        /^Run "\S+" has corrupt data in Redis \(.+\) and cannot be shown; "redflow runs list" shows it as a row marked corrupt\.\n$/,
      );
    } finally {
      await damaged.close();
    }
  });

  describe('errors are one sentence on stderr, exit code 1, no stack trace', () => {
    it('a Redis that does not answer', async () => {
      const result = await run(['workflows', '--redis', 'redis://127.0.0.1:1', '--prefix', 'anything']);
      expect(result.code).toBe(1);
      expect(result.stdout).toBe('');
      expect(result.stderr.endsWith('\n')).toBe(true);
      expect(lines(result.stderr)).toHaveLength(1);
      expect(result.stderr).toMatch(/^Cannot connect to Redis at redis:\/\/127\.0\.0\.1:1 \(.+\): check --redis or REDIS_URL, and that Redis is running\.\n$/);
      expect(result.stderr).not.toMatch(STACK_LINE);
    });

    it('a Redis URL with a password: the password is never printed', async () => {
      const [refused, notUrl] = await Promise.all([
        run(['workflows', '--redis', 'redis://ops:hunter2-pass@127.0.0.1:1']),
        run(['workflows', '--redis', 'redis:/ops:hunter2-pass@127.0.0.1:1']),
      ]);
      expect(refused).toMatchObject({ code: 1, stdout: '' });
      expect(refused.stderr).toBe(
        'Cannot connect to Redis at redis://ops:***@127.0.0.1:1 (connect ECONNREFUSED 127.0.0.1:1): check --redis or REDIS_URL, and that Redis is running.\n',
      );
      expect(notUrl).toEqual({
        code: 1,
        stdout: '',
        stderr: '"redis:/ops:***@127.0.0.1:1" is not a Redis URL: use --redis redis://host:port (or set REDIS_URL).\n',
      });
    });

    it('a --redis that is not a Redis URL', async () => {
      expect(await run(['workflows', '--redis', 'nope'])).toEqual({
        code: 1,
        stdout: '',
        stderr: '"nope" is not a Redis URL: use --redis redis://host:port (or set REDIS_URL).\n',
      });
    });

    it('an unknown command or option', async () => {
      const [unknown, option] = await Promise.all([run(['frobnicate', 'now']), run(['workflows', '--bogus'])]);
      expect(unknown).toMatchObject({ code: 1, stdout: '' });
      expect(unknown.stderr.startsWith('Unknown command "frobnicate now".\nUsage:\n  redflow dashboard [--port 3667]')).toBe(true);
      expect(option).toMatchObject({ code: 1, stdout: '' });
      expect(option.stderr.startsWith("Unknown option '--bogus'.")).toBe(true);
      expect(option.stderr).not.toMatch(STACK_LINE);
    });

    it('dashboard: a --port that is not a port, or one already in use', async () => {
      const busy = new URL(process.env.REDFLOW_TEST_REDIS_URL!).port; // the test Redis listens there
      const [bad, inUse] = await Promise.all([redflow('dashboard', '--port', 'abc'), redflow('dashboard', '--port', busy)]);
      for (const [result, port] of [
        [bad, 'abc'],
        [inUse, busy],
      ] as const) {
        expect(result).toMatchObject({ code: 1, stdout: '' });
        expect(lines(result.stderr)).toHaveLength(1);
        expect(result.stderr).not.toMatch(STACK_LINE);
        expect(result.stderr).toContain(port);
      }
    });
  });

  describe('redflow dashboard', () => {
    let proc: ChildProcess | undefined;
    afterEach(async () => {
      if (proc && proc.exitCode === null && proc.signalCode === null) {
        const closed = new Promise((resolve) => proc!.once('close', resolve));
        proc.kill('SIGKILL');
        await closed;
      }
      proc = undefined;
    });

    /** A running `redflow dashboard`, with its output so far. */
    interface Dashboard {
      /** Its first line: the URL line. */
      line: string;
      base: string;
      port: number;
      output: { stdout: string; stderr: string };
      /** Resolves with the match once `stream` matches `pattern`; rejects if the process ends first. */
      until(stream: 'stdout' | 'stderr', pattern: RegExp): Promise<RegExpExecArray>;
      stopped: Promise<number | null>;
    }

    /** Starts `redflow dashboard --port 0 <args>`; resolves once it printed its URL line. */
    async function startDashboard(args: string[], env: Record<string, string> = {}): Promise<Dashboard> {
      proc = start(['dashboard', '--port', '0', ...args], env);
      const child = proc;
      const output = { stdout: '', stderr: '' };
      const waiters: Array<() => void> = [];
      const stopped = new Promise<number | null>((resolve) => child.once('close', resolve));
      for (const stream of ['stdout', 'stderr'] as const) {
        child[stream]!.setEncoding('utf8').on('data', (chunk: string) => {
          output[stream] += chunk;
          for (const check of waiters.splice(0)) check();
        });
      }
      const until = (stream: 'stdout' | 'stderr', pattern: RegExp) =>
        new Promise<RegExpExecArray>((resolve, reject) => {
          const check = () => {
            const match = pattern.exec(output[stream]);
            if (match) resolve(match);
            else waiters.push(check);
          };
          check();
          void stopped.then((code) => reject(new Error(`redflow dashboard exited (${code}) before its ${stream} matched ${pattern}:\n${output.stderr}`)));
        });
      const [, line, base, port] = await until('stdout', /^(Redflow dashboard for prefix "[^"\n]*" on (http:\/\/127\.0\.0\.1:(\d+))\/[^\n]*)\n/);
      return { line, base, port: Number(port), output, until, stopped };
    }

    /** `redflow dashboard <args> --redis <test redis> --prefix <engine prefix>`. */
    const dashboard = (...args: string[]) => startDashboard([...args, ...common]);

    async function stopWithSigterm(dash: Dashboard): Promise<void> {
      proc!.kill('SIGTERM');
      expect(await dash.stopped).toBe(0);
    }

    it('--allow-actions: prints its URL, serves the page and the API, and stops on SIGTERM', async () => {
      const dash = await dashboard('--allow-actions');
      expect(dash.line).toBe(`Redflow dashboard for prefix "${engine.prefix}" on http://127.0.0.1:${dash.port}/`);
      expect((await request(dash.base).get('/api/meta').expect(200)).body).toEqual({ readOnly: false, prefix: engine.prefix });
      await request(dash.base).get('/').expect(200).expect('content-type', 'text/html; charset=utf-8');
      await request(dash.base).get('/api/overview').expect(200);
      await request(dash.base).get('/nothing-here').expect(404);
      await stopWithSigterm(dash);
      expect(dash.output).toEqual({ stdout: `${dash.line}\n`, stderr: '' });
    });

    it('--allow-actions: the page cancels with its token; a rebound Host, another origin or a missing token cancel nothing', async () => {
      const dash = await dashboard('--allow-actions');
      const { id } = await engine.client.runByName('parked-job', { cancel: 'from the page' });
      const page = await request(dash.base).get('/').expect(200);
      const token = /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text)![1];
      const cancel = () => request(dash.base).post(`/api/run/cancel?id=${id}`);
      const json = { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' };
      // DNS rebinding: the attacker's page reaches the port under its own host name.
      expect(
        (
          await cancel()
            .set({ ...json, host: `rebound.example:${dash.port}`, 'x-redflow-csrf': token })
            .send({})
        ).status,
      ).toBe(421);
      expect((await cancel().set({ 'content-type': 'application/json', origin: 'https://evil.example', 'x-redflow-csrf': token }).send({})).status).toBe(403);
      expect((await cancel().set(json).send({})).body.code).toBe('CSRF_TOKEN');
      expect((await engine.client.getRun(id))!.status).toBe('queued');
      expect(
        (
          await cancel()
            .set({ ...json, 'x-redflow-csrf': token })
            .send({})
            .expect(200)
        ).body,
      ).toEqual({ canceled: true });
      expect((await engine.client.getRun(id))!.status).toBe('canceled');
    });

    it('without --allow-actions it is read-only', async () => {
      const dash = await dashboard();
      expect(dash.line).toBe(
        `Redflow dashboard for prefix "${engine.prefix}" on http://127.0.0.1:${dash.port}/ (read-only; --allow-actions enables cancel, re-run and resume)`,
      );
      expect((await request(dash.base).get('/api/meta').expect(200)).body).toEqual({ readOnly: true, prefix: engine.prefix });
      await stopWithSigterm(dash);
    });

    it('answers only requests for its own Host or an --allowed-host; others get 421 before anything else runs', async () => {
      const dash = await dashboard('--allowed-host', 'Dashboard.Test:8080', '--allowed-host', 'ops.test');
      const { port } = dash;
      const statusFor = async (host: string) => (await request(dash.base).get('/api/meta').set('Host', host)).status;
      const hosts = [`127.0.0.1:${port}`, `localhost:${port}`, `LocalHost:${port}`, `[::1]:${port}`, 'dashboard.test:8080', `ops.test:${port}`];
      const strangers = [
        'evil.example',
        `evil.example:${port}`,
        `127.0.0.1:${port + 1}`,
        `dashboard.test:${port}`,
        'ops.test:8080',
        `localhost.evil.example:${port}`,
        '',
      ];
      expect(await Promise.all(hosts.map(statusFor))).toEqual(hosts.map(() => 200));
      expect(await Promise.all(strangers.map(statusFor))).toEqual(strangers.map(() => 421));

      const refused = await request(dash.base)
        .get('/')
        .set('Host', `rebound.example:${port}`)
        .expect(421)
        .expect('content-type', 'application/json; charset=utf-8');
      expect(refused.body).toEqual({
        statusCode: 421,
        code: 'MISDIRECTED',
        message: `This dashboard answers to Host "127.0.0.1:${port}" only; start it with --allowed-host <name> to allow another.`,
      });
    });

    it('with a token: 401 without it; the Bearer header; a one-time login link that sets a session cookie; the token is never printed', async () => {
      const token = randomBytes(24).toString('hex');
      const dash = await startDashboard(common, { REDFLOW_DASHBOARD_TOKEN: token });
      const [, link, code] = await dash.until(
        'stdout',
        /\nSign in at (http:\/\/127\.0\.0\.1:\d+\/\?login=([0-9a-f]{64})) \(the link works once; scripts send "Authorization: Bearer <token>"\)\.\n/,
      );
      expect(link).toBe(`${dash.base}/?login=${code}`);
      const tokenRequired = {
        statusCode: 401,
        code: 'TOKEN_REQUIRED',
        message:
          'This dashboard requires a token: open the one-time login link that "redflow dashboard" printed when it started, or send the header "Authorization: Bearer <token>".',
      };

      const anonymous = await request(dash.base).get('/api/meta').expect(401).expect('www-authenticate', 'Bearer realm="redflow"');
      expect(anonymous.body).toEqual(tokenRequired);
      await request(dash.base).get('/').expect(401);
      const wrongSameLength = randomBytes(24).toString('hex');
      expect((await request(dash.base).get('/api/meta').set('Authorization', `Bearer ${wrongSameLength}`).expect(401)).body).toEqual(tokenRequired);
      await request(dash.base)
        .get('/api/meta')
        .set('Authorization', `Bearer ${token.slice(0, -1)}`)
        .expect(401);
      await request(dash.base).get('/api/meta').set('Authorization', token).expect(401);
      expect((await request(dash.base).get('/api/meta').set('Authorization', `Bearer ${token}`).expect(200)).body).toEqual({
        readOnly: true,
        prefix: engine.prefix,
      });
      // The Host check comes first, token or not.
      await request(dash.base).get('/api/meta').set('Authorization', `Bearer ${token}`).set('Host', `evil.example:${dash.port}`).expect(421);

      const signIn = await request(dash.base).get(`/?login=${code}`).expect(302).expect('location', '/');
      const setCookie = signIn.headers['set-cookie'] as unknown as string[];
      expect(setCookie).toHaveLength(1);
      const session = /^redflow_session=([0-9a-f]{64}); HttpOnly; SameSite=Strict; Path=\/$/.exec(setCookie[0])?.[1];
      expect(session).toBeDefined();
      const again = await request(dash.base).get(`/?login=${code}`).expect(401);
      expect(again.body).toEqual({
        statusCode: 401,
        code: 'TOKEN_REQUIRED',
        message:
          'This login link was used already or is not valid: each link works once. Restart "redflow dashboard" for a new one, or send the header "Authorization: Bearer <token>".',
      });
      expect(again.headers['set-cookie']).toBeUndefined();

      const cookie = `theme=dark; redflow_session=${session}`;
      expect((await request(dash.base).get('/api/meta').set('Cookie', cookie).expect(200)).body).toEqual({ readOnly: true, prefix: engine.prefix });
      await request(dash.base).get('/').set('Cookie', cookie).expect(200).expect('content-type', 'text/html; charset=utf-8');
      await request(dash.base)
        .get('/api/meta')
        .set('Cookie', `redflow_session=${randomBytes(32).toString('hex')}`)
        .expect(401);

      await stopWithSigterm(dash);
      expect(dash.output.stdout + dash.output.stderr).not.toContain(token);
      expect(lines(dash.output.stdout)).toEqual([dash.line, `Sign in at ${link} (the link works once; scripts send "Authorization: Bearer <token>").`]);
    });

    it('refuses a token shorter than 16 characters, and an --allowed-host that is not a host', async () => {
      const [short, badHost] = await Promise.all([
        redflow('dashboard', '--port', '0', '--token', 'fifteen-chars!!'),
        redflow('dashboard', '--port', '0', '--allowed-host', 'http://ops.test/'),
      ]);
      expect(short).toEqual({
        code: 1,
        stdout: '',
        stderr:
          'The dashboard token (--token or REDFLOW_DASHBOARD_TOKEN) must be at least 16 characters long, got 15: generate one with "openssl rand -hex 32".\n',
      });
      expect(badHost).toEqual({
        code: 1,
        stdout: '',
        stderr:
          '--allowed-host takes a host name or address with an optional port, such as dashboard.internal or dashboard.internal:8080 ([fd00::1]:8080 for IPv6), got "http://ops.test/".\n',
      });
    });

    it('refuses an address other than loopback without a token; --insecure starts it with a warning', async () => {
      expect(await redflow('dashboard', '--port', '0', '--host', '0.0.0.0')).toEqual({
        code: 1,
        stdout: '',
        stderr:
          'Refusing to serve the dashboard on 0.0.0.0 without a token: anyone who can reach that address would see run inputs and outputs, and with --allow-actions could cancel runs. ' +
          'Set REDFLOW_DASHBOARD_TOKEN (or pass --token) to require a token, or pass --insecure to accept the risk.\n',
      });

      // Listening on every interface, it prints (and answers to) the host it was told browsers use.
      const dash = await dashboard('--host', '0.0.0.0', '--insecure', '--allowed-host', '127.0.0.1');
      await dash.until('stderr', /\n/);
      expect(dash.output.stderr).toBe(
        `Warning: the dashboard listens on 0.0.0.0:${dash.port} without a token (--insecure): anyone who can reach it sees run inputs and outputs.\n`,
      );
      await request(dash.base).get('/api/meta').expect(200);
      // Not a loopback bind: localhost is not one of its names.
      await request(dash.base).get('/api/meta').set('Host', `localhost:${dash.port}`).expect(421);
    });

    it('with Redis down at start: it starts anyway, says so in one line without the password, serves the page, and answers 503 for data', async () => {
      const dash = await startDashboard(['--redis', 'redis://ops:hunter2-pass@127.0.0.1:1', '--prefix', 'cli-down']);
      // The page loads (its script then shows "Redis unreachable"): its token needs no Redis.
      const page = await request(dash.base).get('/').expect(200).expect('content-type', 'text/html; charset=utf-8');
      expect(page.text).toMatch(/<meta name="redflow-csrf" content="[^"]+\.[^"]+\.[^"]+">/);
      expect((await request(dash.base).get('/api/meta').expect(200)).body).toEqual({ readOnly: true, prefix: 'cli-down' });
      expect((await request(dash.base).get('/api/overview').expect(503)).body).toMatchObject({ statusCode: 503, code: 'REDIS_UNAVAILABLE' });
      await stopWithSigterm(dash);
      expect(dash.output.stderr).toBe(
        'Redis at redis://ops:***@127.0.0.1:1 is unreachable (connect ECONNREFUSED 127.0.0.1:1); the dashboard keeps retrying and shows errors until it is back.\n',
      );
      expect(dash.output.stdout + dash.output.stderr).not.toContain('hunter2');
    });

    it('keeps working across a Redis restart, without being restarted itself', async () => {
      const redis = await OwnRedis.start();
      try {
        const dash = await startDashboard(['--redis', redis.url, '--prefix', 'cli-restart']);
        await request(dash.base).get('/api/overview').expect(200);

        await redis.kill();
        await dash.until('stderr', /is unreachable .*\n/);
        expect((await request(dash.base).get('/api/overview').expect(503)).body).toMatchObject({ statusCode: 503, code: 'REDIS_UNAVAILABLE' });

        await redis.restart();
        await dash.until('stderr', /is reachable again\.\n/);
        await request(dash.base).get('/api/overview').expect(200);

        expect(lines(dash.output.stderr)).toEqual([
          expect.stringMatching(
            new RegExp(
              `^Redis at redis://127\\.0\\.0\\.1:${redis.port} is unreachable \\(.+\\); the dashboard keeps retrying and shows errors until it is back\\.$`,
            ),
          ),
          `Redis at redis://127.0.0.1:${redis.port} is reachable again.`,
        ]);
        await stopWithSigterm(dash);
      } finally {
        await redis.stop();
      }
    });
  });

  describe('what reaches the terminal', () => {
    /** Colours, a carriage return over the line, an 8-bit CSI (0x9b) that JSON.stringify leaves raw. */
    const PAINT = '\u001b[31mRED\u001b[0m\rcover\u009b2J';
    const PAINT_ERROR = '\u001b[31mRED\u001b[0m\r\bcover\nsecond line';
    const SECRET_INPUT = { card: { number: '4242', cvcToken: 'abc' }, password: 'hunter2' };
    let terminal: TestEngine;
    let local: string[];
    const runIds = {} as { painted: string; paintFailed: string; charge: string };

    /** Characters a terminal acts on, except the newlines between lines. */
    const rawControls = (text: string) => [...text].filter((c) => c !== '\n' && (c < ' ' || (c >= '\u007f' && c <= '\u009f')));

    beforeAll(async () => {
      terminal = new TestEngine();
      local = ['--redis', process.env.REDFLOW_TEST_REDIS_URL!, '--prefix', terminal.prefix];
      const { registry, client } = terminal;
      const paint = registry.define('paint', {}, ({ input }: WorkflowContext<{ fail: boolean }>) => {
        if (input.fail) throw new Error(PAINT_ERROR);
        return PAINT;
      });
      const charge = registry.define('charge', {}, async ({ step }: WorkflowContext<typeof SECRET_INPUT>) => {
        const { receipt } = await step.run('charge-card', () => ({ receipt: 'r-1', apiKey: 'key-in-step-output' }));
        return { ok: true, receipt, token: 'token-in-output' };
      });
      await terminal.worker({ logger: silent });
      const painted = await client.start(paint, { fail: false });
      await painted.result({ timeoutMs: 5000 });
      const paintFailed = await client.start(paint, { fail: true });
      await expect(paintFailed.result({ timeoutMs: 5000 })).rejects.toThrow('second line');
      const charged = await client.start(charge, SECRET_INPUT);
      await charged.result({ timeoutMs: 5000 });
      Object.assign(runIds, { painted: painted.id, paintFailed: paintFailed.id, charge: charged.id });
    });
    afterAll(() => terminal?.close());

    const redflowHere = (...args: string[]) => run([...args, ...local]);

    it('runs show: control characters in outputs and errors are printed escaped, never raw', async () => {
      const [painted, failed] = await Promise.all([redflowHere('runs', 'show', runIds.painted), redflowHere('runs', 'show', runIds.paintFailed)]);
      expect(painted).toMatchObject({ code: 0, stderr: '' });
      expect(lines(painted.stdout)[3]).toBe('output: "\\u001b[31mRED\\u001b[0m\\rcover\\x9b2J"');
      expect(rawControls(painted.stdout)).toEqual([]);

      expect(failed).toMatchObject({ code: 0, stderr: '' });
      expect(lines(failed.stdout)[3]).toBe('error: Error: \\x1b[31mRED\\x1b[0m\\r\\x08cover\\nsecond line');
      expect(lines(failed.stdout)).toHaveLength(6);
      expect(rawControls(failed.stdout)).toEqual([]);
    });

    it('--json: the same data as escapes that parse back to the stored strings', async () => {
      const [shown, listed] = await Promise.all([
        redflowHere('runs', 'show', runIds.painted, '--json'),
        redflowHere('runs', 'list', '--workflow', 'paint', '--json'),
      ]);
      for (const result of [shown, listed]) {
        expect(result).toMatchObject({ code: 0, stderr: '' });
        expect(rawControls(result.stdout)).toEqual([]);
        expect(result.stdout).toContain('"\\u001b[31mRED\\u001b[0m\\rcover\\u009b2J"');
      }
      expect((JSON.parse(shown.stdout) as { run: RunState }).run.output).toBe(PAINT);
      const runs = JSON.parse(listed.stdout) as RunState[];
      expect(runs.map((r) => r.id)).toEqual([runIds.paintFailed, runIds.painted]);
      expect(runs[0].error).toMatchObject({ name: 'Error', message: PAINT_ERROR });
    });

    it('an id with control characters is echoed escaped', async () => {
      expect(await redflowHere('runs', 'show', '\u001b[2Jgone')).toEqual({
        code: 1,
        stdout: '',
        stderr: `Run "\\x1b[2Jgone" does not exist under prefix "${terminal.prefix}".\n`,
      });
      expect(await redflowHere('runs', 'cancel', '\u001b[2Jgone')).toEqual({
        code: 1,
        stdout: '',
        stderr: `Run "\\x1b[2Jgone" does not exist under prefix "${terminal.prefix}".\n`,
      });
    });

    it('runs show and runs list --json mask the values of secret keys in inputs, outputs and step outputs', async () => {
      // Stored as given: only what is printed is masked.
      expect((await terminal.client.getRun(runIds.charge))!.input).toEqual(SECRET_INPUT);
      const [text, asJson, listed] = await Promise.all([
        redflowHere('runs', 'show', runIds.charge),
        redflowHere('runs', 'show', runIds.charge, '--json'),
        redflowHere('runs', 'list', '--workflow', 'charge', '--json'),
      ]);
      expect(text).toMatchObject({ code: 0, stderr: '' });
      expect(lines(text.stdout).slice(2, 4)).toEqual([
        'input: {"card":{"number":"4242","cvcToken":"***"},"password":"***"}',
        'output: {"ok":true,"receipt":"r-1","token":"***"}',
      ]);

      const view = json<{ run: RunState; steps: StepState[] }>(asJson);
      expect(view.run.input).toEqual({ card: { number: '4242', cvcToken: '***' }, password: '***' });
      expect(view.run.output).toEqual({ ok: true, receipt: 'r-1', token: '***' });
      expect(view.steps.map((s) => [s.name, s.output])).toEqual([['charge-card', { receipt: 'r-1', apiKey: '***' }]]);
      expect(json<RunState[]>(listed).map((r) => r.input)).toEqual([{ card: { number: '4242', cvcToken: '***' }, password: '***' }]);

      for (const result of [text, asJson, listed]) {
        for (const secret of ['hunter2', '"abc"', 'key-in-step-output', 'token-in-output']) expect(result.stdout).not.toContain(secret);
      }
    });

    it('runs show: a waiting step says what it waits for, a parent names its children; runs signal delivers a JSON payload', async () => {
      const approval = terminal.registry.define('cli-approval', {}, async ({ step }) => step.waitForSignal<{ approved: boolean }>('approval', 'approve'));
      const child = terminal.registry.define('cli-child', {}, async ({ step }) => step.waitForSignal('hold', 'go'));
      const parent = terminal.registry.define('cli-parent', {}, async ({ step }) => step.runWorkflow('sub', child, {}));
      await terminal.client.syncRegistry(terminal.registry, { owner: 'test-app' });
      const worker = await terminal.worker({ logger: silent, concurrency: 4 });
      const [waiting, parentRun] = [await terminal.client.start(approval, {}), await terminal.client.start(parent, {})];
      await eventually(async () => (await terminal.client.getRunChildren(parentRun.id)).length === 1);
      await eventually(async () => (await terminal.client.getRunSteps(waiting.id))[0]?.status === 'waiting');
      await eventually(async () => (await terminal.client.getRunSteps(parentRun.id))[0]?.status === 'waiting');
      const [childId] = await terminal.client.getRunChildren(parentRun.id);

      const shown = lines((await redflowHere('runs', 'show', waiting.id)).stdout);
      expect(cells(shown.at(-1)!)).toEqual(['1', 'approval', 'waiting', '1', 'signal "approve"']);
      const parentShown = lines((await redflowHere('runs', 'show', parentRun.id)).stdout);
      expect(parentShown).toContain(`children: ${childId}`);
      expect(cells(parentShown.at(-1)!)).toEqual(['1', 'sub', 'waiting', '1', `run ${childId}`]);

      const [badJson, noName, missing] = await Promise.all([
        redflowHere('runs', 'signal', waiting.id, 'approve', '{oops'),
        redflowHere('runs', 'signal', waiting.id),
        redflowHere('runs', 'signal', 'no-such-run', 'approve'),
      ]);
      expect(badJson).toMatchObject({ code: 1, stdout: '' });
      expect(badJson.stderr).toMatch(/^The payload \{oops is not JSON\./);
      expect(noName).toMatchObject({ code: 1, stdout: '' });
      expect(noName.stderr).toContain('give the signal name');
      expect(missing).toMatchObject({ code: 1, stdout: '' });
      expect(missing.stderr).toContain('no-such-run');
      // Nothing was delivered by the refused calls: the run still waits.
      expect((await terminal.client.getRun(waiting.id))!.status).toBe('scheduled');

      const sent = await redflowHere('runs', 'signal', waiting.id, 'approve', '{"approved":true}');
      expect(sent).toEqual({ code: 0, stdout: `Sent signal approve to run ${waiting.id}.\n`, stderr: '' });
      await expect(waiting.result({ timeoutMs: 5_000 })).resolves.toEqual({ approved: true });
      const late = await redflowHere('runs', 'signal', waiting.id, 'approve');
      expect(late).toMatchObject({ code: 1, stdout: '' });
      expect(late.stderr).toContain('has ended (succeeded)');

      await terminal.client.cancelRun(parentRun.id);
      await worker.stop();
    });

    it('runs list under a prefix with no registered workflow says so, naming the prefix', async () => {
      const result = await run(['runs', 'list', '--redis', process.env.REDFLOW_TEST_REDIS_URL!, '--prefix', 'no-such-prefix']);
      expect(result).toMatchObject({ code: 0, stderr: '' });
      expect(result.stdout).toBe(
        'No runs match. No workflow is registered under prefix "no-such-prefix": check --prefix (or REDFLOW_PREFIX); a worker registers its workflows when it starts.\n',
      );
    });

    it("runs show masks a waiting step's event match as the dashboard does", async () => {
      const waiting = terminal.registry.define('await-shipment', {}, async ({ step }) => {
        await step.waitForEvent('shipment', 'order.shipped', { match: { orderId: 'o-1', accessToken: 'tok-in-match' } });
      });
      await terminal.client.syncRegistry(terminal.registry, { owner: 'test-app' });
      const worker = await terminal.worker({ logger: silent });
      const { id } = await terminal.client.start(waiting, {});
      await eventually(async () => (await terminal.client.getRunSteps(id)).some((step) => step.status === 'waiting'));
      const view = json<{ run: RunState; steps: StepState[] }>(await redflowHere('runs', 'show', id, '--json'));
      expect(view.steps).toEqual([
        expect.objectContaining({ name: 'shipment', status: 'waiting', event: 'order.shipped', match: { orderId: 'o-1', accessToken: '***' } }),
      ]);
      await terminal.client.cancelRun(id);
      await worker.stop();
    });

    it('--redact <module>: the function applies after the default masking to runs show, runs list and the dashboard; a bad module is one sentence', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'redflow-redact-'));
      try {
        const module = join(dir, 'redact.js');
        // It sees the masked run: it records what it got for the password, and hides the card number.
        writeFileSync(
          module,
          `module.exports = (run) => ({ ...run, workflow: run.workflow.toUpperCase(), input: run.input && { ...run.input, card: '(hidden)', sawPassword: run.input.password } });\n`,
        );
        const withRedact = (...args: string[]) => redflowHere(...args, '--redact', module);
        const [shown, listed, table] = await Promise.all([
          withRedact('runs', 'show', runIds.charge, '--json'),
          withRedact('runs', 'list', '--workflow', 'charge', '--json'),
          withRedact('runs', 'list', '--workflow', 'charge'),
        ]);
        const hidden = { card: '(hidden)', password: '***', sawPassword: '***' };
        expect(json<{ run: RunState }>(shown).run).toMatchObject({ workflow: 'CHARGE', input: hidden });
        expect(json<RunState[]>(listed).map((r) => [r.workflow, r.input])).toEqual([['CHARGE', hidden]]);
        expect(table).toMatchObject({ code: 0, stderr: '' });
        expect(cells(lines(table.stdout)[2]).slice(0, 3)).toEqual([runIds.charge, 'CHARGE', 'succeeded']);

        const dash = start(['dashboard', '--port', '0', '--redact', module, ...local]);
        try {
          let stdout = '';
          dash.stdout!.setEncoding('utf8');
          const base = await new Promise<string>((resolve) =>
            dash.stdout!.on('data', (chunk: string) => {
              stdout += chunk;
              const match = / on (http:\/\/127\.0\.0\.1:\d+)\//.exec(stdout);
              if (match) resolve(match[1]);
            }),
          );
          const detail = (await request(base).get(`/api/run?id=${runIds.charge}`).expect(200)).body;
          expect(JSON.parse(detail.run.input.text)).toEqual(hidden);
          expect(detail.run.workflow).toBe('CHARGE');
        } finally {
          const closed = new Promise((resolve) => dash.once('close', resolve));
          dash.kill('SIGTERM');
          await closed;
        }

        const none = join(dir, 'none.js');
        writeFileSync(none, 'module.exports = { answer: 42 };\n');
        expect(await redflowHere('runs', 'show', runIds.charge, '--redact', none)).toEqual({
          code: 1,
          stdout: '',
          stderr: `The --redact module "${none}" exports no function: export a function (run) => run, as module.exports or as "redact".\n`,
        });
        const absent = await redflowHere('runs', 'show', runIds.charge, '--redact', join(dir, 'absent.js'));
        expect(absent).toMatchObject({ code: 1, stdout: '' });
        expect(absent.stderr).toMatch(
          new RegExp(
            `^Cannot load the --redact module "${join(dir, 'absent.js').replace(/[.]/g, '\\.')}" \\(.+\\): give the path of a JavaScript module that exports a function \\(run\\) => run\\.\\n$`,
          ),
        );
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
});
