import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import request from 'supertest';
import type { RedflowLogger, RunState, StepState, WorkflowContext, WorkflowMeta } from '../../lib';
import { clusterMode, TestEngine } from '../support/engine';

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

/** The environment of a CLI process: no REDIS_URL / REDFLOW_PREFIX unless a test sets them. */
function cliEnv(env: Record<string, string>): NodeJS.ProcessEnv {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  for (const name of ['REDIS_URL', 'REDFLOW_PREFIX'] as const) if (!(name in env)) delete childEnv[name];
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
    const greet = registry.define('greet', { maxConcurrency: Infinity, event: [{ name: 'user.signed-up' }] }, async ({ input, step }: WorkflowContext<{ name: string }>) =>
      step.run('compose', () => `Hello ${input.name}`),
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
    expect(cells(row('explode'))).toEqual(['explode', 'default', '2', '1', 'test-app']);
    expect(cells(row('nightly'))).toEqual(['nightly', 'parked', '1', '1', 'nightly#0', 'test-app']);
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
    expect(byName.greet).toEqual({ name: 'greet', queue: 'default', maxAttempts: 1, maxConcurrency: null, events: ['user.signed-up'], crons: [], owner: 'test-app', updatedAt: expect.any(Number) });
    expect(byName.explode).toMatchObject({ queue: 'default', maxAttempts: 2, maxConcurrency: 1, events: [], crons: [] });
    expect(byName['parked-job']).toMatchObject({ queue: 'parked' });
    expect(byName.nightly).toMatchObject({ queue: 'parked', crons: ['nightly#0'] });
    expect(json(fromEnv)).toEqual(workflows);
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
    expect(cells(rows[3])).toEqual([ids.explode, 'explode', 'failed', '2/2', new Date(explode.createdAt).toISOString(), new Date(explode.finishedAt!).toISOString()]);
    expect(cells(rows[0])).toEqual([ids.parked[2], 'parked-job', 'queued', '0/1', expect.stringMatching(/^\d{4}-\d\d-\d\dT/)]);

    const failedRuns = json<RunState[]>(failed);
    expect(failedRuns).toHaveLength(1);
    expect(failedRuns[0]).toMatchObject({ id: ids.explode, workflow: 'explode', status: 'failed', input: { order: 7 }, attempt: 2, maxAttempts: 2, error: { name: 'Error', message: 'kaboom' } });
    expect(json<RunState[]>(page).map((r) => r.id)).toEqual([ids.parked[1], ids.parked[0]]);
    expect(none).toEqual({ code: 0, stdout: 'No runs match.\n', stderr: '' });
    expect(badStatus).toEqual({ code: 1, stdout: '', stderr: 'Unknown status "done". Use one of scheduled, queued, running, succeeded, failed, canceled.\n' });
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
    expect(out.slice(0, 5)).toEqual([
      `${ids.greet}  greet  succeeded  attempt 1/1`,
      `created ${new Date(greet.createdAt).toISOString()}  finished ${new Date(greet.finishedAt!).toISOString()}`,
      'input: {"name":"Ada"}',
      'output: "Hello Ada"',
      '',
    ]);
    expect(cells(out[5])).toEqual(['seq', 'name', 'status', 'attempt', 'duration']);
    expect(cells(out[7])).toEqual(['1', 'compose', 'succeeded', '1', `${steps[0].finishedAt! - steps[0].startedAt!} ms`]);
    expect(out).toHaveLength(8);

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

  it('runs cancel: cancels a queued run; a second cancel says it was not canceled', async () => {
    const { id } = await engine.client.runByName('parked-job', { cancel: 'me' });
    const first = await redflow('runs', 'cancel', id);
    expect(first).toEqual({ code: 0, stdout: `Canceled run ${id}.\n`, stderr: '' });
    expect(await engine.client.getRun(id)).toMatchObject({ status: 'canceled', cancelReason: 'canceled from the CLI' });

    expect(await redflow('runs', 'cancel', id)).toEqual({ code: 0, stdout: `Run ${id} was not canceled: it already ended or does not exist.\n`, stderr: '' });

    const other = await engine.client.runByName('parked-job', { cancel: 'with reason' });
    expect(json(await redflow('runs', 'cancel', other.id, '--reason', 'duplicate order', '--json'))).toEqual({ id: other.id, canceled: true });
    expect(await engine.client.getRun(other.id)).toMatchObject({ status: 'canceled', cancelReason: 'duplicate order' });
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

    it('a --redis that is not a Redis URL', async () => {
      expect(await run(['workflows', '--redis', 'nope'])).toEqual({ code: 1, stdout: '', stderr: '"nope" is not a Redis URL: use --redis redis://host:port (or set REDIS_URL).\n' });
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
      for (const [result, port] of [[bad, 'abc'], [inUse, busy]] as const) {
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

    /** Starts the dashboard on a free port; resolves with its URL line and base URL. */
    async function dashboard(...args: string[]): Promise<{ line: string; base: string; stopped: Promise<number | null> }> {
      proc = start(['dashboard', '--port', '0', ...args, ...common]);
      const child = proc;
      let stdout = '';
      let stderr = '';
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
      const stopped = new Promise<number | null>((resolve) => child.once('close', resolve));
      const line = await new Promise<string>((resolve, reject) => {
        child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
          stdout += chunk;
          if (stdout.includes('\n')) resolve(stdout.split('\n')[0]);
        });
        void stopped.then((code) => reject(new Error(`redflow dashboard exited (${code}) before printing its URL:\n${stderr}`)));
      });
      const port = /on http:\/\/127\.0\.0\.1:(\d+)\//.exec(line)?.[1];
      expect(Number(port)).toBeGreaterThan(0);
      return { line, base: `http://127.0.0.1:${port}`, stopped };
    }

    it('--allow-actions: prints its URL, serves the page and the API, and cancels runs', async () => {
      const { id } = await engine.client.runByName('parked-job', { via: 'dashboard' });
      const { line, base, stopped } = await dashboard('--allow-actions');
      expect(line).toMatch(new RegExp(`^Redflow dashboard for prefix "${engine.prefix}" on http://127\\.0\\.0\\.1:\\d+/$`));

      expect((await request(base).get('/api/meta').expect(200)).body).toEqual({ readOnly: false, prefix: engine.prefix });
      const page = await request(base).get('/').expect(200).expect('content-type', 'text/html; charset=utf-8');
      expect(page.text).toContain('src="/app.js"');
      expect(page.headers['content-security-policy']).toContain("default-src 'self'");
      const runs = (await request(base).get('/api/runs?workflow=greet').expect(200)).body as { runs: RunState[] };
      expect(runs.runs.map((r) => r.id)).toEqual([ids.greet]);
      expect((await request(base).post(`/api/runs/${id}/cancel`).set('x-redflow-action', '1').expect(200)).body).toEqual({ canceled: true });
      expect((await engine.client.getRun(id))!.status).toBe('canceled');
      await request(base).get('/nothing-here').expect(404);

      proc!.kill('SIGTERM');
      expect(await stopped).toBe(0);
    });

    it('without --allow-actions it is read-only', async () => {
      const { id } = await engine.client.runByName('parked-job', { via: 'read-only dashboard' });
      const { line, base, stopped } = await dashboard();
      expect(line.endsWith('/ (read-only; --allow-actions enables cancel and re-run)')).toBe(true);
      expect((await request(base).get('/api/meta').expect(200)).body).toEqual({ readOnly: true, prefix: engine.prefix });
      expect((await request(base).post(`/api/runs/${id}/cancel`).set('x-redflow-action', '1').expect(403)).body.message).toBe('The dashboard is read-only: actions are disabled.');
      expect((await engine.client.getRun(id))!.status).toBe('queued');
      proc!.kill('SIGTERM');
      expect(await stopped).toBe(0);
    });
  });
});
