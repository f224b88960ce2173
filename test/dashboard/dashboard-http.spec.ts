import 'reflect-metadata';

import { createServer, request as httpRequest, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Controller, Get, type INestApplication } from '@nestjs/common';
import request from 'supertest';

import {
  ConfigurationError,
  createDashboardHandler,
  NonRetriableError,
  RedflowModule,
  type DashboardOptions,
  type DashboardRun,
  type RedflowLogger,
  type RunSummary,
  type WorkflowClient,
  type WorkflowContext,
} from '../../lib';
import { nextCronTick } from '../../lib/core/definition/cron';
import { deferred, eventually, TestEngine } from '../support/engine';
import { createNestApp } from '../support/nest-app';

/**
 * The dashboard's HTTP surface as a plain Node handler: the page and its assets, the JSON API over
 * the public client (summaries in lists, payload previews in a run's detail, whole payloads as
 * downloads), access control (authorize, readOnly, the anti-CSRF checks on actions), masking and
 * redaction, and the Nest module. Real Redis, real workers; the browser test covers rendering and
 * dashboard-nest.spec the Nest routes on Express and Fastify.
 */

const silent: RedflowLogger = { log() {}, warn() {}, error() {} };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const JSON_TYPE = 'application/json; charset=utf-8';
/** What the page's own fetch sends with an action, apart from its token. */
const SAME_ORIGIN_JSON = { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' };
const XSS = { note: '<script>alert(1)</script>', avatar: '<img src=x onerror=alert(1)>' };

/** A plain Node server around the handler; anything it does not handle is a bare 404. */
function serve(client: WorkflowClient, options: Partial<DashboardOptions> = {}, logger: RedflowLogger = silent): Server {
  const handler = createDashboardHandler(client, { path: '/redflow', authorize: () => true, ...options }, logger);
  return createServer((req, res) => void handler(req, res).then((handled) => handled || res.writeHead(404).end()));
}

/** The anti-CSRF token the page at `path` carries. */
async function pageToken(server: Server, path = '/redflow/', headers: Record<string, string> = {}): Promise<string> {
  const page = await request(server).get(path).set(headers).expect(200);
  const match = /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text);
  if (!match) throw new Error(`No token in the page at ${path}`);
  return match[1];
}

/** An action as the page sends it: same origin, JSON, with the page's token. */
async function act(server: Server, id: string, action: 'cancel' | 'rerun' | 'resume' | 'terminate' | 'delete', extra = '') {
  const token = await pageToken(server);
  return request(server)
    .post(`/redflow/api/run/${action}?id=${encodeURIComponent(id)}${extra}`)
    .set({ ...SAME_ORIGIN_JSON, 'x-redflow-csrf': token })
    .send({});
}

/** A GET with the path exactly as given. */
function rawGet(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path, method: 'GET' }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    })
      .on('error', reject)
      .end();
  });
}

interface RunsPage {
  runs: RunSummary[];
  offset: number;
  limit: number;
  hasMore: boolean;
}

interface Preview {
  text: string;
  bytes: number;
  truncated: boolean;
}

describe('dashboard HTTP API (seeded runs)', () => {
  let engine: TestEngine;
  const gate = deferred();
  let server: Server;
  const ids = {} as {
    ok: string[];
    xss: string;
    boom: string;
    parent: string;
    child: string;
    hold: string;
    idle: string[]; // oldest first; idle[0] is canceled
    later: string;
  };

  beforeAll(async () => {
    engine = new TestEngine();
    const { registry, client } = engine;
    const ok = registry.define('ok', { maxConcurrency: Infinity, event: [{ name: 'order.placed' }] }, ({ input }) => input);
    const boom = registry.define('boom', {}, () => {
      throw new Error('card declined');
    });
    const child = registry.define('child', {}, ({ input }: WorkflowContext<{ n: number }>) => input.n * 2);
    const parent = registry.define('parent', {}, async ({ input, step }: WorkflowContext<{ n: number }>) => {
      const doubled = await step.runWorkflow('kid', child, { n: input.n });
      await step.setProgress({ phase: 'doubled' });
      await pause(5); // the parent finishes strictly after its child: a stable order by finish time
      return { doubled };
    });
    const hold = registry.define('hold', {}, async () => {
      await gate.promise;
      return 'released';
    });
    const idle = registry.define('idle', { queue: 'parked' }, () => 'never runs');
    registry.define('ticker', { queue: 'parked', cron: [{ id: 'ticker-yearly', expression: '0 0 1 1 *', input: { tick: true } }] }, () => 'tick');
    await engine.worker({ queues: ['default'], logger: silent });

    // Sequential with small gaps: distinct timestamps make "newest first" unambiguous.
    ids.ok = [];
    for (const n of [1, 2]) {
      const handle = await client.start(ok, { n });
      await handle.result({ timeoutMs: 5000 });
      ids.ok.push(handle.id);
      await pause(3);
    }
    const xss = await client.start(ok, XSS);
    await xss.result({ timeoutMs: 5000 });
    ids.xss = xss.id;
    await pause(3);
    const failed = await client.start(boom, { card: '4000 0000 0000 0002' });
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('card declined');
    ids.boom = failed.id;
    await pause(3);
    const parentRun = await client.start(parent, { n: 21 });
    await expect(parentRun.result({ timeoutMs: 5000 })).resolves.toEqual({ doubled: 42 });
    ids.parent = parentRun.id;
    [ids.child] = await client.getRunChildren(parentRun.id);
    ids.hold = (await client.start(hold, {})).id;
    await eventually(async () => (await client.getRun(ids.hold))?.status === 'running');
    ids.idle = [];
    for (let i = 0; i < 5; i++) {
      ids.idle.push((await client.start(idle, { i })).id);
      await pause(3);
    }
    expect(await client.cancelRun(ids.idle[0], { reason: 'not needed' })).toBe(true);
    await pause(3);
    ids.later = (await client.start(idle, { i: 'later' }, { runAt: Date.now() + 3_600_000 })).id;
    // A runtime schedule whose first tick is days away.
    await client.schedule('ticker-monthly', { workflow: 'ticker', every: '30d', input: { tick: 'runtime' } });
    server = serve(client);
  });

  afterAll(async () => {
    gate.resolve();
    await engine?.close();
  });

  const get = (path: string) => request(server).get(path);

  describe('page and assets', () => {
    it('GET <path>/ and <path> serve the page, referencing its script and stylesheet under the path, with a CSP and an anti-CSRF token', async () => {
      for (const path of ['/redflow/', '/redflow']) {
        const res = await get(path).expect(200);
        expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
        expect(res.headers['content-security-policy']).toContain("default-src 'self'");
        expect(res.headers['content-security-policy']).toContain("script-src 'self'");
        expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
        expect(res.headers['x-content-type-options']).toBe('nosniff');
        expect(res.text).toContain('<script src="/redflow/app.js"');
        expect(res.text).toContain('<link rel="stylesheet" href="/redflow/app.css">');
        expect(res.text).toContain('data-base="/redflow"');
        expect(res.text).not.toContain('__BASE__');
        expect(res.text).not.toContain('__TOKEN__');
        // An empty icon the CSP allows (img-src data:): the browser asks for no /favicon.ico.
        expect(res.text).toContain('<link rel="icon" href="data:,">');
        expect(res.headers['content-security-policy']).toContain("img-src 'self' data:");
      }
      // issued.nonce.signature
      expect(await pageToken(server)).toMatch(/^[0-9a-z]+\.[\w-]+\.[\w-]+$/);
    });

    it('serves app.js and app.css with their types, and leaves other paths to the next handler', async () => {
      const js = await get('/redflow/app.js').expect(200);
      expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(js.text.length).toBeGreaterThan(100);
      expect(js.text).not.toContain('__BASE__');
      const css = await get('/redflow/app.css').expect(200);
      expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
      expect(css.text.length).toBeGreaterThan(10);
      // Outside the path the handler returns false: the server's own bare 404.
      for (const path of ['/', '/other', '/redflowx', '/redflow-api/meta']) {
        const res = await get(path).expect(404);
        expect(res.text).toBe('');
      }
      // Inside the path, an unknown route is the dashboard's JSON 404, with a code.
      const missing = await get('/redflow/api/nope').expect(404);
      expect(missing.body).toEqual({ statusCode: 404, code: 'NOT_FOUND', message: 'Nothing at GET /redflow/api/nope.' });
      // A long path is not echoed whole: the message repeats its first 120 characters.
      const long = `/redflow/api/${'x'.repeat(4000)}`;
      const cut = await get(long).expect(404);
      expect(cut.body.message).toBe(`Nothing at GET ${long.slice(0, 119)}….`);
      const run = await get(`/redflow/api/run?id=${'r'.repeat(4000)}`).expect(404);
      expect(run.body.message).toBe(`Run "${'r'.repeat(119)}…" does not exist.`);
    });

    it('answers 400 BAD_PATH for a raw path with "..", "//", a backslash or an encoded "." or "/", before any routing', async () => {
      // Sent as written: node:http does not normalize a request path (supertest would turn "\\" into "/").
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      try {
        const { port } = server.address() as AddressInfo;
        for (const path of [
          '/redflow/../redflow/api/runs',
          '/redflow//api/runs',
          '/redflow/%2e%2e/api/runs',
          '/redflow/api%2Fruns',
          '/redflow/api\\runs',
          '/x/../redflow/api/runs',
          '/redflow/.%2E/api/runs',
        ]) {
          const { status, body } = await rawGet(port, path);
          expect([path, status, JSON.parse(body).code]).toEqual([path, 400, 'BAD_PATH']);
        }
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
    });
  });

  describe('JSON API', () => {
    it('meta: readOnly and prefix', async () => {
      const res = await get('/redflow/api/meta').expect(200);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.body).toEqual({ readOnly: false, prefix: engine.prefix });
    });

    it('overview: counts per status and per workflow, and the runs ended per minute of the last hour', async () => {
      const before = Date.now();
      const res = await get('/redflow/api/overview').expect(200);
      const after = Date.now();
      expect(res.body.byStatus).toEqual({
        scheduled: 1,
        queued: 4,
        running: 1,
        compensating: 0,
        succeeded: 5,
        failed: 1,
        canceled: 1,
        compensation_failed: 0,
        terminated: 0,
      });
      expect(res.body.byWorkflow).toEqual({ boom: 1, child: 1, hold: 1, idle: 6, ok: 3, parent: 1, ticker: 0 });

      const perMinute = res.body.perMinute as Array<{ minute: number; succeeded: number; failed: number }>;
      expect(perMinute).toHaveLength(60);
      perMinute.forEach((m, i) => i && expect(m.minute - perMinute[i - 1].minute).toBe(60_000));
      const minuteOf = (t: number) => t - (t % 60_000);
      expect([minuteOf(before), minuteOf(after)]).toContain(perMinute[59].minute);
      // Every succeeded and failed run counts in the minute it finished.
      const expected = new Map<number, { succeeded: number; failed: number }>();
      for (const id of [...ids.ok, ids.xss, ids.boom, ids.parent, ids.child]) {
        const run = (await engine.client.getRun(id))!;
        const slot = expected.get(minuteOf(run.finishedAt!)) ?? { succeeded: 0, failed: 0 };
        slot[run.status as 'succeeded' | 'failed']++;
        expected.set(minuteOf(run.finishedAt!), slot);
      }
      for (const m of perMinute) expect({ succeeded: m.succeeded, failed: m.failed }).toEqual(expected.get(m.minute) ?? { succeeded: 0, failed: 0 });
      expect(perMinute.reduce((sum, m) => sum + m.succeeded, 0)).toBe(5);
      expect(perMinute.reduce((sum, m) => sum + m.failed, 0)).toBe(1);
    });

    it('workflows: the registered workflows (queue, events, concurrency) and the crons and runtime schedules with their next tick, without their input', async () => {
      const res = await get('/redflow/api/workflows').expect(200);
      const workflows = res.body.workflows as Array<Record<string, unknown>>;
      expect(workflows.map((w) => w.name)).toEqual(['boom', 'child', 'hold', 'idle', 'ok', 'parent', 'ticker']);
      const byName = Object.fromEntries(workflows.map((w) => [w.name, w]));
      expect(byName.ok).toMatchObject({ queue: 'default', maxAttempts: 1, maxConcurrency: null, events: ['order.placed'], crons: [], owner: 'test-app' });
      expect(byName.boom).toMatchObject({ queue: 'default', maxConcurrency: null, events: [], crons: [] });
      expect(byName.idle).toMatchObject({ queue: 'parked', events: [] });
      expect(byName.ticker).toMatchObject({ queue: 'parked', crons: ['ticker-yearly'] });
      expect(res.body.crons).toEqual([
        { id: 'ticker-monthly', source: 'runtime', workflow: 'ticker', every: 2_592_000_000, nextAt: expect.any(Number) },
        { id: 'ticker-yearly', source: 'definition', workflow: 'ticker', expression: '0 0 1 1 *', nextAt: expect.any(Number) },
      ]);
      expect(res.body.crons[0].nextAt).toBe(nextCronTick('ticker', { every: 2_592_000_000 }, Date.now()));
      expect(res.body.crons[1].nextAt).toBe(nextCronTick('ticker', { expression: '0 0 1 1 *' }, Date.now()));
    });

    it('runs: summaries only (no input or output), newest first, filtered by workflow and status', async () => {
      const ids_ = (page: RunsPage) => page.runs.map((r) => r.id);
      const all = (await get('/redflow/api/runs').expect(200)).body as RunsPage;
      expect(all).toMatchObject({ offset: 0, limit: 25, hasMore: false });
      expect(ids_(all).sort()).toEqual([ids.hold, ids.later, ...ids.idle, ids.parent, ids.child, ids.boom, ids.xss, ...ids.ok].sort());
      for (const row of all.runs) {
        expect(
          Object.keys(row).filter(
            (key) =>
              ![
                'id',
                'workflow',
                'queue',
                'status',
                'attempt',
                'maxAttempts',
                'createdAt',
                'availableAt',
                'startedAt',
                'finishedAt',
                'durationMs',
                'parentId',
                'error',
              ].includes(key),
          ),
        ).toEqual([]);
      }

      const ok = (await get('/redflow/api/runs?workflow=ok').expect(200)).body as RunsPage;
      expect(ids_(ok)).toEqual([ids.xss, ids.ok[1], ids.ok[0]]);
      const failed = (await get('/redflow/api/runs?status=failed').expect(200)).body as RunsPage;
      expect(ids_(failed)).toEqual([ids.boom]);
      const boomRun = (await engine.client.getRun(ids.boom))!;
      expect(failed.runs[0]).toStrictEqual({
        id: ids.boom,
        workflow: 'boom',
        queue: 'default',
        status: 'failed',
        attempt: 1,
        maxAttempts: 1,
        createdAt: boomRun.createdAt,
        availableAt: boomRun.availableAt,
        startedAt: boomRun.startedAt,
        finishedAt: boomRun.finishedAt,
        durationMs: boomRun.finishedAt! - boomRun.startedAt!,
        error: { name: 'Error', message: 'card declined' },
      });
      // Ended runs list by finish time: the child finished before its parent.
      const succeeded = (await get('/redflow/api/runs?status=succeeded').expect(200)).body as RunsPage;
      expect(ids_(succeeded)).toEqual([ids.parent, ids.child, ids.xss, ids.ok[1], ids.ok[0]]);
      expect(succeeded.runs.find((r) => r.id === ids.child)!.parentId).toBe(ids.parent);
      const queuedIdle = (await get('/redflow/api/runs?workflow=idle&status=queued').expect(200)).body as RunsPage;
      expect(ids_(queuedIdle)).toEqual([ids.idle[4], ids.idle[3], ids.idle[2], ids.idle[1]]);
      expect(ids_((await get('/redflow/api/runs?status=canceled').expect(200)).body)).toEqual([ids.idle[0]]);
      expect(ids_((await get('/redflow/api/runs?status=scheduled').expect(200)).body)).toEqual([ids.later]);
      expect(ids_((await get('/redflow/api/runs?status=running').expect(200)).body)).toEqual([ids.hold]);
      expect(ids_((await get('/redflow/api/runs?workflow=idle&status=succeeded').expect(200)).body)).toEqual([]);
      expect(ids_((await get('/redflow/api/runs?workflow=no-such-workflow').expect(200)).body)).toEqual([]);
      // Empty filters are no filters (what the page's selects send for "all").
      expect(ids_((await get('/redflow/api/runs?workflow=&status=').expect(200)).body)).toEqual(ids_(all));
    });

    it('runs: pages with limit and offset, hasMore telling whether another page exists; limit is capped at 100', async () => {
      const page = async (query: string) => (await get(`/redflow/api/runs?${query}`).expect(200)).body as RunsPage;
      const queued = [ids.idle[4], ids.idle[3], ids.idle[2], ids.idle[1]];
      const q1 = await page('workflow=idle&status=queued&limit=3');
      expect(q1).toMatchObject({ offset: 0, limit: 3, hasMore: true });
      expect(q1.runs.map((r) => r.id)).toEqual(queued.slice(0, 3));
      const q2 = await page('workflow=idle&status=queued&limit=3&offset=3');
      expect(q2).toMatchObject({ offset: 3, limit: 3, hasMore: false });
      expect(q2.runs.map((r) => r.id)).toEqual(queued.slice(3));
      const exact = await page('workflow=idle&status=queued&limit=4');
      expect(exact.hasMore).toBe(false);
      expect(exact.runs).toHaveLength(4);

      // Across workflows (merged status indexes) too.
      const s1 = await page('status=succeeded&limit=2&offset=1');
      expect(s1).toMatchObject({ offset: 1, limit: 2, hasMore: true });
      expect(s1.runs.map((r) => r.id)).toEqual([ids.child, ids.xss]);
      const s2 = await page('status=succeeded&limit=2&offset=3');
      expect(s2).toMatchObject({ offset: 3, limit: 2, hasMore: false });
      expect(s2.runs.map((r) => r.id)).toEqual([ids.ok[1], ids.ok[0]]);
      const beyond = await page('limit=5&offset=100');
      expect(beyond).toMatchObject({ runs: [], offset: 100, limit: 5, hasMore: false, nextCursor: null });
      expect((await page('limit=5000')).limit).toBe(100);
    });

    it('runs: 400 BAD_REQUEST for an unknown status or a limit / offset that is not a whole number >= 0', async () => {
      const bad = async (query: string) => (await get(`/redflow/api/runs?${query}`).expect(400).expect('content-type', JSON_TYPE)).body;
      expect(await bad('status=done')).toEqual({
        statusCode: 400,
        code: 'BAD_REQUEST',
        message: 'Unknown status "done". Use one of scheduled, queued, running, compensating, succeeded, failed, canceled, compensation_failed, terminated.',
      });
      const notWhole = (name: string) => ({ statusCode: 400, code: 'BAD_REQUEST', message: `The query parameter "${name}" must be a whole number >= 0.` });
      expect(await bad('limit=-1')).toEqual(notWhole('limit'));
      expect(await bad('limit=ten')).toEqual(notWhole('limit'));
      expect(await bad('limit=2.5')).toEqual(notWhole('limit'));
      expect(await bad('offset=-3')).toEqual(notWhole('offset'));
    });

    it('runs: offset goes up to 10000 (a deep page reads every row before it); beyond, 400 BAD_REQUEST', async () => {
      expect((await get('/redflow/api/runs?limit=5&offset=10000').expect(200)).body).toMatchObject({
        runs: [],
        offset: 10_000,
        limit: 5,
        hasMore: false,
        nextCursor: null,
      });
      for (const offset of ['10001', '1000000']) {
        expect((await get(`/redflow/api/runs?offset=${offset}`).expect(400)).body).toEqual({
          statusCode: 400,
          code: 'BAD_REQUEST',
          message: 'The query parameter "offset" must be at most 10000: filter by workflow and status to reach older runs.',
        });
      }
    });

    it('run?id=: the run with payload previews, its steps and its children; a child names its parent', async () => {
      const res = await get(`/redflow/api/run?id=${ids.parent}`).expect(200);
      const body = res.body as { run: Record<string, unknown>; steps: Array<Record<string, unknown>>; children: string[]; moreChildren: number };
      expect(body.run).toMatchObject({ id: ids.parent, workflow: 'parent', queue: 'default', status: 'succeeded', attempt: 1 });
      expect(body.run.input).toEqual({ text: JSON.stringify({ n: 21 }, null, 2), bytes: JSON.stringify({ n: 21 }, null, 2).length, truncated: false });
      expect(body.run.output).toEqual({
        text: JSON.stringify({ doubled: 42 }, null, 2),
        bytes: JSON.stringify({ doubled: 42 }, null, 2).length,
        truncated: false,
      });
      expect(body.run.parentId).toBeUndefined();
      const progressText = JSON.stringify({ phase: 'doubled' }, null, 2);
      expect(body.run.progress).toEqual({ text: progressText, bytes: progressText.length, truncated: false });
      expect(body.steps).toEqual([
        expect.objectContaining({ name: 'kid', status: 'succeeded', output: { text: '42', bytes: 2, truncated: false }, seq: 1, attempt: 1, attempts: 1 }),
      ]);
      expect(body.children).toEqual([ids.child]);
      expect(body.moreChildren).toBe(0);

      const child = (await get(`/redflow/api/run?id=${ids.child}`).expect(200)).body as typeof body;
      expect(child.run).toMatchObject({ id: ids.child, workflow: 'child', status: 'succeeded', parentId: ids.parent });
      expect(child.steps).toEqual([]);
      expect(child.children).toEqual([]);

      const failed = (await get(`/redflow/api/run?id=${ids.boom}`).expect(200)).body as typeof body;
      expect(failed.run).toMatchObject({
        status: 'failed',
        error: { name: 'Error', message: 'card declined', detail: expect.objectContaining({ truncated: false }) },
      });
      expect(JSON.parse((failed.run.error as { detail: Preview }).detail.text)).toMatchObject({ name: 'Error', message: 'card declined' });
      // The stack comes as its lines, for the page to show as they are (not as JSON with "\n" in it).
      const stack = (failed.run.error as { stack: string }).stack;
      expect(stack.split('\n')[0]).toBe('Error: card declined');
      expect(stack.split('\n').length).toBeGreaterThan(1);
      // Its attempts: the failed one, with the error and its stack as lines.
      const attempts = (failed as unknown as { attempts: Array<{ attempt: number; outcome: string; error?: { message: string; stack?: string } }> }).attempts;
      expect(attempts.at(-1)).toMatchObject({ outcome: 'failed', error: { message: 'card declined' } });
      expect(attempts.at(-1)!.error!.stack!.split('\n')[0]).toBe('Error: card declined');
      const canceled = (await get(`/redflow/api/run?id=${ids.idle[0]}`).expect(200)).body as typeof body;
      expect(canceled.run).toMatchObject({ status: 'canceled', cancelReason: 'not needed' });
    });

    it('run?id=: 404 RUN_NOT_FOUND for a run that does not exist, 400 without an id', async () => {
      const res = await get('/redflow/api/run?id=no-such-run').expect(404);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.body).toEqual({ statusCode: 404, code: 'RUN_NOT_FOUND', message: 'Run "no-such-run" does not exist.' });
      // Encoded ids are decoded once; a malformed encoding is still just a missing run.
      expect((await get('/redflow/api/run?id=a%20b').expect(404)).body.message).toBe('Run "a b" does not exist.');
      expect((await get('/redflow/api/run?id=%E0%A4%A').expect(404)).body.code).toBe('RUN_NOT_FOUND');
      expect((await get('/redflow/api/run').expect(400)).body).toEqual({
        statusCode: 400,
        code: 'BAD_REQUEST',
        message: 'Give the run id as the query parameter "id".',
      });
    });

    it('returns markup in run data as JSON text (escaped by the page, never served as HTML)', async () => {
      const res = await get(`/redflow/api/run?id=${ids.xss}`).expect(200);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-security-policy']).toContain("script-src 'self'");
      expect(JSON.parse(res.body.run.input.text)).toEqual(XSS);
      expect(JSON.parse(res.body.run.output.text)).toEqual(XSS);
      const download = await get(`/redflow/api/run/payload?id=${ids.xss}&field=input`).expect(200);
      expect(download.headers['content-type']).toBe(JSON_TYPE);
      expect(download.headers['content-disposition']).toBe(`attachment; filename="${ids.xss}-input.json"`);
      expect(JSON.parse(download.text)).toEqual(XSS);
    });

    it('run/payload: 400 for an unknown field, 404 for a field the run does not have', async () => {
      expect((await get(`/redflow/api/run/payload?id=${ids.ok[0]}&field=secrets`).expect(400)).body.message).toBe(
        'The query parameter "field" must be input, output, error, progress or step:<name>.',
      );
      expect(JSON.parse((await get(`/redflow/api/run/payload?id=${ids.parent}&field=progress`).expect(200)).text)).toEqual({ phase: 'doubled' });
      expect((await get(`/redflow/api/run/payload?id=${ids.ok[0]}&field=error`).expect(404)).body).toEqual({
        statusCode: 404,
        code: 'NOT_FOUND',
        message: `Run "${ids.ok[0]}" has no error.`,
      });
      expect(JSON.parse((await get(`/redflow/api/run/payload?id=${ids.parent}&field=step:kid`).expect(200)).text)).toBe(42);
    });
  });
});

describe('dashboard payload size, corrupt runs, masking and redaction', () => {
  let engine: TestEngine;
  let server: Server;
  const MiB = 1024 * 1024;

  beforeAll(async () => {
    engine = new TestEngine();
    engine.registry.define('idle', { queue: 'parked' }, () => 'never runs');
    await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
    server = serve(engine.client);
  });
  afterAll(() => engine?.close());

  it('run?id=: the pending waits of a run: signal name, event and match, and deadline', async () => {
    const waiter = engine.registry.define('waiter', {}, async ({ step }) => {
      await Promise.all([
        step.waitForSignal('approval', 'approve', { timeout: '1h' }),
        step.waitForEvent('shipment', 'order.shipped', { match: { orderId: 'o-9' } }),
      ]);
    });
    const worker = await engine.worker();
    const { id } = await engine.client.start(waiter, {});
    await eventually(async () => (await engine.client.getRun(id))?.status === 'scheduled');
    const body = (await request(server).get(`/redflow/api/run?id=${id}`).expect(200)).body as { steps: Array<Record<string, unknown>> };
    expect(body.steps).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'approval', status: 'waiting', signal: 'approve', wakeAt: expect.any(Number) }),
        expect.objectContaining({ name: 'shipment', status: 'waiting', event: 'order.shipped', match: { orderId: 'o-9' } }),
      ]),
    );
    await engine.client.cancelRun(id);
    await worker.stop();
  });

  it('fifty runs of 1 MiB: the list stays under 100 KB; the detail cuts each payload to 64 KiB and the download is whole', async () => {
    const huge = 'x'.repeat(MiB - 64); // each input just under the default 1 MiB payload limit
    const started: string[] = [];
    for (let i = 0; i < 50; i++) started.push((await engine.client.runByName('idle', { i, huge })).id);
    const list = await request(server).get('/redflow/api/runs?workflow=idle&limit=50').expect(200);
    expect((list.body as RunsPage).runs.map((r) => r.id).sort()).toEqual([...started].sort());
    expect(Buffer.byteLength(list.text)).toBeLessThan(100_000);

    const detail = await request(server).get(`/redflow/api/run?id=${started[7]}`).expect(200);
    const input = detail.body.run.input as Preview;
    expect(input.truncated).toBe(true);
    expect(Buffer.byteLength(input.text)).toBeLessThanOrEqual(64 * 1024);
    expect(input.text.startsWith('{\n  "i": 7,\n  "huge": "xxxx')).toBe(true);
    expect(input.bytes).toBe(Buffer.byteLength(JSON.stringify({ i: 7, huge }, null, 2)));
    expect(Buffer.byteLength(detail.text)).toBeLessThan(70 * 1024);

    const download = await request(server).get(`/redflow/api/run/payload?id=${started[7]}&field=input`).expect(200);
    expect(JSON.parse(download.text)).toEqual({ i: 7, huge });
    for (const id of started) await engine.client.cancelRun(id);
  });

  it('fifty failed runs whose error class has a 10,000-character name: the list stays under 100 KB, each name cut to 100 characters', async () => {
    const longName = `Declined${'X'.repeat(10_000)}`;
    engine.registry.define('long-error-name', {}, () => {
      const error = new Error('declined');
      error.name = longName;
      throw error;
    });
    await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
    const worker = await engine.worker({ queues: ['default'], concurrency: 10, logger: silent });
    const handles = [];
    for (let i = 0; i < 50; i++) handles.push(await engine.client.runByName('long-error-name', { i }));
    for (const handle of handles) await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('declined');
    await worker.stop();
    const list = await request(server).get('/redflow/api/runs?workflow=long-error-name&limit=50').expect(200);
    const rows = (list.body as RunsPage).runs;
    expect(rows).toHaveLength(50);
    expect(Buffer.byteLength(list.text)).toBeLessThan(100_000);
    expect(rows[0].error).toEqual({ name: `${longName.slice(0, 99)}…`, message: 'declined' });
  });

  it('a corrupt run is one row marked corrupt with its id; the list stays 200 and its detail is a 422 with a code', async () => {
    const intact = (await engine.client.runByName('idle', { n: 1 })).id;
    const damaged = (await engine.client.runByName('idle', { n: 2 })).id;
    await engine.redis.hset(engine.client.keys.run(damaged), 'status', 'bogus', 'attempt', 'two');
    const list = (await request(server).get('/redflow/api/runs?workflow=idle&status=queued').expect(200)).body as RunsPage;
    const byId = new Map(list.runs.map((row) => [row.id, row]));
    expect(byId.get(intact)).toMatchObject({ id: intact, status: 'queued' });
    expect(byId.get(intact)!.corrupt).toBeUndefined();
    expect(byId.get(damaged)).toMatchObject({ id: damaged, corrupt: expect.stringContaining('field "status" has the unknown value "bogus"') });
    await request(server).get('/redflow/api/runs').expect(200);
    await request(server).get('/redflow/api/overview').expect(200);
    expect((await request(server).get(`/redflow/api/run?id=${damaged}`).expect(422)).body).toEqual({
      statusCode: 422,
      code: 'CORRUPT_RUN',
      message: `Run "${damaged}" has corrupt data in Redis and cannot be shown.`,
    });
    await request(server).get(`/redflow/api/run?id=${intact}`).expect(200);
  });

  it('masks fields named like password, token, secret or authorization at any depth, in previews and downloads', async () => {
    const input = { user: 'ada', password: 'hunter2', card: { cvcToken: '123', last4: '4242' }, headers: [{ Authorization: 'Bearer abc' }], clientSecret: 's' };
    const { id } = await engine.client.runByName('idle', input);
    const detail = await request(server).get(`/redflow/api/run?id=${id}`).expect(200);
    const shown = JSON.parse(detail.body.run.input.text);
    expect(shown).toEqual({ user: 'ada', password: '***', card: { cvcToken: '***', last4: '4242' }, headers: [{ Authorization: '***' }], clientSecret: '***' });
    for (const secret of ['hunter2', 'Bearer abc', '"123"']) expect(detail.text).not.toContain(secret);
    const download = await request(server).get(`/redflow/api/run/payload?id=${id}&field=input`).expect(200);
    expect(JSON.parse(download.text)).toEqual(shown);
    // The stored run is untouched.
    expect((await engine.client.getRun(id))!.input).toEqual(input);
  });

  it('the redact option applies to the detail, the download and the error of list rows, after the default masking', async () => {
    const redacting = serve(engine.client, {
      redact: (run) => ({ ...run, input: { email: '(hidden)' }, error: run.error && { ...run.error, message: run.error.message.replace(/\d{4}/g, '####') } }),
    });
    engine.registry.define('declines', {}, () => {
      throw new Error('card 4242 declined');
    });
    await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
    await engine.worker({ queues: ['default'], logger: silent });
    const failed = await engine.client.runByName('declines', { email: 'ada@example.com', token: 't' });
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('card 4242 declined');
    const detail = await request(redacting).get(`/redflow/api/run?id=${failed.id}`).expect(200);
    expect(JSON.parse(detail.body.run.input.text)).toEqual({ email: '(hidden)' });
    expect(detail.body.run.error.message).toBe('card #### declined');
    expect(detail.text).not.toContain('ada@example.com');
    const download = await request(redacting).get(`/redflow/api/run/payload?id=${failed.id}&field=input`).expect(200);
    expect(JSON.parse(download.text)).toEqual({ email: '(hidden)' });
    const row = ((await request(redacting).get('/redflow/api/runs?workflow=declines').expect(200)).body as RunsPage).runs[0];
    expect(row).toMatchObject({ id: failed.id, error: { name: 'Error', message: 'card #### declined' } });
  });

  it('redact receives runs already masked, and list rows show its whole result, failed or not', async () => {
    const seen: DashboardRun[] = [];
    const redacting = serve(engine.client, {
      redact: (run) => {
        seen.push(run);
        return { ...run, workflow: 'hidden-workflow', queue: 'hidden-queue', input: { masked: true } };
      },
    });
    const { id } = await engine.client.runByName('idle', { user: 'ada', password: 'hunter2', nested: [{ apiKey: 'k-1' }] });
    const detail = (await request(redacting).get(`/redflow/api/run?id=${id}`).expect(200)).body;
    // The default masking ran first: redact never sees the secret values.
    expect(seen.map((run) => run.input)).toEqual([{ user: 'ada', password: '***', nested: [{ apiKey: '***' }] }]);
    expect(detail.run).toMatchObject({ id, workflow: 'hidden-workflow', queue: 'hidden-queue' });
    const rows = ((await request(redacting).get('/redflow/api/runs?workflow=idle&status=queued').expect(200)).body as RunsPage).runs;
    expect(rows.find((row) => row.id === id)).toMatchObject({ id, workflow: 'hidden-workflow', queue: 'hidden-queue', status: 'queued' });
    expect(rows.filter((row) => row.corrupt === undefined).every((row) => row.workflow === 'hidden-workflow')).toBe(true);
    // A row carries summary fields only, whatever redact returns.
    expect(rows.find((row) => row.id === id)).not.toHaveProperty('input');
    await engine.client.cancelRun(id);
  });
});

describe('createDashboardHandler options', () => {
  it('refuses to build a handler without authorize, naming the option and showing examples', () => {
    let error: unknown;
    try {
      // The options are checked before the client is used.
      createDashboardHandler({} as WorkflowClient, { path: '/redflow' } as DashboardOptions);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('createDashboardHandler needs an "authorize" option');
    expect((error as Error).message).toContain('authorize: () => true');
  });
});

describe('dashboard access control', () => {
  let engine: TestEngine;
  let queuedId: string;

  beforeAll(async () => {
    engine = new TestEngine();
    engine.registry.define('idle', { queue: 'parked' }, () => 'never runs');
    await engine.client.syncRegistry(engine.registry, { owner: 'test-app' });
    queuedId = (await engine.client.runByName('idle', { i: 1 })).id;
  });
  afterAll(() => engine?.close());

  it('authorize returning false: 403 FORBIDDEN for the page, the assets, the API and the actions', async () => {
    const seen: IncomingMessage[] = [];
    const server = serve(engine.client, {
      authorize: (req) => {
        seen.push(req);
        return false;
      },
    });
    const denied = { statusCode: 403, code: 'FORBIDDEN', message: 'Access to the dashboard was denied by its authorize function.' };
    const paths = [
      '/redflow/',
      '/redflow',
      '/redflow/app.js',
      '/redflow/api/meta',
      '/redflow/api/overview',
      '/redflow/api/runs',
      `/redflow/api/run?id=${queuedId}`,
      `/redflow/api/run/payload?id=${queuedId}&field=input`,
    ];
    for (const path of paths) {
      const res = await request(server).get(path).expect(403);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.body).toEqual(denied);
      expect(res.text).not.toContain('never runs');
    }
    for (const action of ['cancel', 'rerun', 'resume', 'terminate', 'delete']) {
      expect((await request(server).post(`/redflow/api/run/${action}?id=${queuedId}`).set(SAME_ORIGIN_JSON).send({}).expect(403)).body).toEqual(denied);
    }
    expect(seen.length).toBe(paths.length + 5);
    expect(seen.every((req) => typeof req.headers === 'object')).toBe(true);
    expect((await engine.client.getRun(queuedId))!.status).toBe('queued');
    expect(await engine.client.listRuns()).toHaveLength(1);
  });

  it('an async authorize reading a header lets that request in and denies the others', async () => {
    const server = serve(engine.client, {
      authorize: async (req) => {
        await pause(1);
        return req.headers['x-user'] === 'admin';
      },
    });
    expect((await request(server).get('/redflow/api/meta').set('x-user', 'admin').expect(200)).body).toEqual({ readOnly: false, prefix: engine.prefix });
    await request(server).get('/redflow/').set('x-user', 'admin').expect(200).expect('content-type', 'text/html; charset=utf-8');
    await request(server).get('/redflow/api/meta').expect(403);
    await request(server).get('/redflow/api/meta').set('x-user', 'guest').expect(403);
    await request(server).get('/redflow/').set('x-user', 'guest').expect(403);
  });

  it('an authorize that throws answers 500 INTERNAL with a generic sentence; the details go to the server log only', async () => {
    const logged: string[] = [];
    const logger: RedflowLogger = { log() {}, warn() {}, error: (message: string) => logged.push(message) };
    const server = serve(
      engine.client,
      {
        authorize: () => {
          throw new Error('session store down at 10.0.0.7');
        },
      },
      logger,
    );
    const res = await request(server).get('/redflow/api/runs').expect(500);
    expect(res.body).toEqual({ statusCode: 500, code: 'INTERNAL', message: 'The dashboard failed to answer; the server log has the details.' });
    expect(res.text).not.toContain('10.0.0.7');
    expect(logged).toEqual([expect.stringContaining('session store down at 10.0.0.7')]);
  });

  it('a cross-site read of the API is 403 CROSS_SITE; a top-level navigation to the page is allowed', async () => {
    const server = serve(engine.client);
    const crossSite = { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors', origin: 'https://evil.example' };
    expect((await request(server).get('/redflow/api/runs').set(crossSite).expect(403)).body.code).toBe('CROSS_SITE');
    expect((await request(server).get(`/redflow/api/run?id=${queuedId}`).set(crossSite).expect(403)).body.code).toBe('CROSS_SITE');
    await request(server).get('/redflow/').set({ 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' }).expect(200);
    await request(server).get('/redflow/api/runs').set({ 'sec-fetch-site': 'same-origin', 'sec-fetch-mode': 'cors' }).expect(200);
  });
});

describe('dashboard actions', () => {
  let engine: TestEngine;
  let server: Server;
  let readOnly: Server;

  beforeAll(async () => {
    engine = new TestEngine();
    engine.registry.define('ok', {}, ({ input }) => input);
    engine.registry.define('boom', {}, () => {
      throw new Error('always fails');
    });
    engine.registry.define('idle', { queue: 'parked' }, () => 'never runs');
    engine.registry.define('saga', {}, async ({ step }) => {
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
    await engine.worker({ queues: ['default'], logger: silent });
    server = serve(engine.client);
    readOnly = serve(engine.client, { readOnly: true });
  });
  /** Whether the compensation of the "saga" workflow succeeds. */
  let refundWorks = false;
  afterAll(() => engine?.close());

  it('cancel: cancels a queued run ({ canceled: true }); a second cancel answers { canceled: false }', async () => {
    const { id } = await engine.client.runByName('idle', { i: 1 });
    const res = await act(server, id, 'cancel');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.body).toEqual({ canceled: true });
    expect(await engine.client.getRun(id)).toMatchObject({ status: 'canceled', cancelReason: 'canceled from the dashboard' });
    expect((await act(server, id, 'cancel')).body).toEqual({ canceled: false });
  });

  it('actions need a same-origin request, a JSON body and the page token; each refusal changes nothing', async () => {
    const { id } = await engine.client.runByName('idle', { i: 2 });
    const token = await pageToken(server);
    const cancel = () => request(server).post(`/redflow/api/run/cancel?id=${id}`);
    // No token, or one that was not signed by this dashboard.
    expect((await cancel().set(SAME_ORIGIN_JSON).send({}).expect(403)).body).toEqual({
      statusCode: 403,
      code: 'CSRF_TOKEN',
      message: 'The page is out of date or the request did not come from it: reload the dashboard and try again.',
    });
    expect(
      (
        await cancel()
          .set({ ...SAME_ORIGIN_JSON, 'x-redflow-csrf': `${token.slice(0, -3)}abc` })
          .send({})
          .expect(403)
      ).body.code,
    ).toBe('CSRF_TOKEN');
    // A token from another dashboard secret is refused too.
    const other = serve(engine.client, { secret: 'another-secret-of-at-least-32-chars!!' });
    expect(
      (
        await cancel()
          .set({ ...SAME_ORIGIN_JSON, 'x-redflow-csrf': await pageToken(other) })
          .send({})
          .expect(403)
      ).body.code,
    ).toBe('CSRF_TOKEN');
    // A form post, what a plain HTML form on another site can send.
    expect((await cancel().set({ 'sec-fetch-site': 'same-origin', 'x-redflow-csrf': token }).type('form').send('x=1').expect(415)).body.code).toBe(
      'JSON_REQUIRED',
    );
    // Another origin, with a valid token and JSON.
    expect(
      (await cancel().set({ 'content-type': 'application/json', origin: 'https://evil.example', 'x-redflow-csrf': token }).send({}).expect(403)).body.code,
    ).toBe('CROSS_ORIGIN');
    expect((await cancel().set({ 'content-type': 'application/json', 'sec-fetch-site': 'same-site', 'x-redflow-csrf': token }).send({})).status).toBe(403);
    // Neither Origin nor Sec-Fetch-Site: nothing proves the request came from the page.
    expect((await cancel().set({ 'content-type': 'application/json', 'x-redflow-csrf': token }).send({})).status).toBe(403);
    expect((await engine.client.getRun(id))!.status).toBe('queued');
    // GET is not an action.
    expect((await request(server).get(`/redflow/api/run/cancel?id=${id}`).expect(405)).body.code).toBe('METHOD_NOT_ALLOWED');
    // An Origin equal to the Host (browsers without Sec-Fetch-Site) is the page itself.
    const host = 'dashboard.internal:8080';
    await cancel()
      .set({ host, origin: `http://${host}`, 'content-type': 'application/json', 'x-redflow-csrf': token })
      .send({})
      .expect(200);
    expect((await engine.client.getRun(id))!.status).toBe('canceled');
  });

  it('readOnly: meta says so, and cancel, re-run, resume, terminate and delete are refused with 403 READ_ONLY, changing nothing', async () => {
    const queued = await engine.client.runByName('idle', { i: 3 });
    const failed = await engine.client.runByName('boom', { i: 3 });
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('always fails');
    const before = (await engine.client.listRuns()).map((r) => r.id);
    expect((await request(readOnly).get('/redflow/api/meta').expect(200)).body).toEqual({ readOnly: true, prefix: engine.prefix });
    const refused = { statusCode: 403, code: 'READ_ONLY', message: 'The dashboard is read-only: actions are disabled.' };
    expect((await act(readOnly, queued.id, 'cancel')).body).toEqual(refused);
    expect((await act(readOnly, failed.id, 'rerun')).body).toEqual(refused);
    expect((await act(readOnly, failed.id, 'resume')).body).toEqual(refused);
    expect((await act(readOnly, queued.id, 'terminate')).body).toEqual(refused);
    expect((await act(readOnly, failed.id, 'delete')).body).toEqual(refused);
    expect((await act(readOnly, queued.id, 'delete', '&force=1')).body).toEqual(refused);
    expect((await engine.client.getRun(queued.id))!.status).toBe('queued');
    expect((await engine.client.getRun(failed.id))!.status).toBe('failed');
    expect((await engine.client.listRuns()).map((r) => r.id)).toEqual(before);
  });

  it('terminate: ends a queued run at once ({ terminated: true }); a second terminate answers { terminated: false }; a missing run is 404', async () => {
    const { id } = await engine.client.runByName('idle', { i: 10 });
    const res = await act(server, id, 'terminate');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.body).toEqual({ terminated: true });
    expect(await engine.client.getRun(id)).toMatchObject({
      status: 'terminated',
      cancelReason: 'terminated from the dashboard',
      error: { name: 'RunTerminatedError' },
    });
    expect((await act(server, id, 'terminate')).body).toEqual({ terminated: false });
    expect((await act(server, 'missing', 'terminate')).body).toEqual({ statusCode: 404, code: 'RUN_NOT_FOUND', message: 'Run "missing" does not exist.' });
    // A terminated run can be re-run and resumed like a failed one.
    expect((await act(server, id, 'rerun')).status).toBe(201);
    expect((await act(server, id, 'resume')).body).toEqual({ runId: id });
    expect((await engine.client.getRun(id))!.status).toBe('queued');
  });

  it('delete: deletes an ended run ({ deleted: true }); a live run is 409 NOT_ENDED and stays, unless force=1', async () => {
    const done = await engine.client.runByName('ok', { v: 'delete me' });
    await done.result({ timeoutMs: 5000 });
    const res = await act(server, done.id, 'delete');
    expect([res.status, res.body]).toEqual([200, { deleted: true }]);
    expect(await engine.client.getRun(done.id)).toBeNull();
    expect((await act(server, done.id, 'delete')).body).toEqual({ statusCode: 404, code: 'RUN_NOT_FOUND', message: `Run "${done.id}" does not exist.` });

    const { id: queuedId } = await engine.client.runByName('idle', { i: 11 });
    const refused = await act(server, queuedId, 'delete');
    expect([refused.status, refused.body]).toEqual([
      409,
      {
        statusCode: 409,
        code: 'NOT_ENDED',
        message: `Run "${queuedId}" is queued: only an ended run can be deleted. Terminate it first, or delete it with force.`,
      },
    ]);
    expect((await engine.client.getRun(queuedId))!.status).toBe('queued');
    expect((await act(server, queuedId, 'delete', '&force=yes')).body).toEqual({
      statusCode: 400,
      code: 'BAD_REQUEST',
      message: 'The query parameter "force" must be 1 or 0.',
    });
    expect((await engine.client.getRun(queuedId))!.status).toBe('queued');
    expect((await act(server, queuedId, 'delete', '&force=1')).body).toEqual({ deleted: true });
    expect(await engine.client.getRun(queuedId)).toBeNull();
  });

  it('terminate and delete need a same-origin JSON request with the page token, like every action', async () => {
    const { id } = await engine.client.runByName('idle', { i: 12 });
    const token = await pageToken(server);
    for (const path of [`/redflow/api/run/terminate?id=${id}`, `/redflow/api/run/delete?id=${id}&force=1`]) {
      expect((await request(server).post(path).set(SAME_ORIGIN_JSON).send({}).expect(403)).body.code).toBe('CSRF_TOKEN');
      expect(
        (
          await request(server)
            .post(path)
            .set({ 'content-type': 'application/json', origin: 'https://evil.example', 'x-redflow-csrf': token })
            .send({})
            .expect(403)
        ).body.code,
      ).toBe('CROSS_ORIGIN');
      expect((await request(server).get(path).expect(405)).body.code).toBe('METHOD_NOT_ALLOWED');
    }
    expect((await engine.client.getRun(id))!.status).toBe('queued');
  });

  it('re-run of a failed run: 201 with the id of a new run of the same workflow and input', async () => {
    const input = { order: 'ord_1', items: [1, 2], note: 'retry me' };
    const failed = await engine.client.runByName('boom', input);
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('always fails');
    const res = await act(server, failed.id, 'rerun');
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.body).toEqual({ runId: expect.any(String) });
    const runId = res.body.runId as string;
    expect(runId).not.toBe(failed.id);
    const rerun = (await engine.client.getRun(runId))!;
    expect(rerun).toMatchObject({ workflow: 'boom', queue: 'default', input });
    await expect(engine.client.handle(runId).result({ timeoutMs: 5000 })).rejects.toThrow('always fails');
    expect((await engine.client.getRun(failed.id))!.status).toBe('failed'); // the original is untouched
  });

  it('re-run of a canceled run starts a new run on its queue', async () => {
    const { id } = await engine.client.runByName('idle', { i: 4 });
    await engine.client.cancelRun(id);
    const res = await act(server, id, 'rerun');
    expect(res.status).toBe(201);
    expect(await engine.client.getRun(res.body.runId as string)).toMatchObject({ workflow: 'idle', queue: 'parked', status: 'queued', input: { i: 4 } });
  });

  it('re-run of a run that is not failed or canceled: 409; of a missing run: 404', async () => {
    const done = await engine.client.runByName('ok', { v: 1 });
    await done.result({ timeoutMs: 5000 });
    const before = (await engine.client.listRuns({ limit: 200 })).length;
    const conflict = await act(server, done.id, 'rerun');
    expect([conflict.status, conflict.body]).toEqual([
      409,
      { statusCode: 409, code: 'NOT_ENDED_BADLY', message: `Run "${done.id}" is succeeded: only failed, canceled or terminated runs can be re-run.` },
    ]);
    const { id: queuedId } = await engine.client.runByName('idle', { i: 5 });
    expect((await act(server, queuedId, 'rerun')).body.message).toBe(`Run "${queuedId}" is queued: only failed, canceled or terminated runs can be re-run.`);
    expect((await engine.client.listRuns({ limit: 200 })).length).toBe(before + 1);
    const missing = { statusCode: 404, code: 'RUN_NOT_FOUND', message: 'Run "missing" does not exist.' };
    expect((await act(server, 'missing', 'rerun')).body).toEqual(missing);
    expect((await act(server, 'missing', 'cancel')).body).toEqual(missing);
  });

  it('resume of a failed run: 200 with its own id; the run goes on under that id at its next attempt', async () => {
    const failed = await engine.client.runByName('boom', { card: 'resume-me' });
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('always fails');
    const before = (await engine.client.listRuns({ limit: 200 })).length;
    // The checks of every action: the page token, the same origin, a JSON body.
    const bare = () => request(server).post(`/redflow/api/run/resume?id=${failed.id}`);
    expect((await bare().set(SAME_ORIGIN_JSON).send({}).expect(403)).body.code).toBe('CSRF_TOKEN');
    const token = await pageToken(server);
    expect(
      (await bare().set({ 'content-type': 'application/json', origin: 'https://evil.example', 'x-redflow-csrf': token }).send({}).expect(403)).body.code,
    ).toBe('CROSS_ORIGIN');
    expect((await bare().set({ 'sec-fetch-site': 'same-origin', 'x-redflow-csrf': token }).type('form').send('x=1').expect(415)).body.code).toBe(
      'JSON_REQUIRED',
    );
    expect((await engine.client.getRun(failed.id))!.status).toBe('failed');
    const res = await act(server, failed.id, 'resume');
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.body).toEqual({ runId: failed.id });
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('always fails');
    expect(await engine.client.getRun(failed.id)).toMatchObject({ status: 'failed', attempt: 2, maxAttempts: 2 });
    expect((await engine.client.listRuns({ limit: 200 })).length).toBe(before); // no new run
  });

  it('a compensation_failed run: listed by its status, shown with both errors; resume runs the compensation left and it ends failed, compensated', async () => {
    const { id } = await engine.client.runByName('saga', {});
    await eventually(async () => (await engine.client.getRun(id))?.status === 'compensation_failed');
    const listed = await request(server).get('/redflow/api/runs?status=compensation_failed').expect(200);
    expect(listed.body.runs.map((r: RunSummary) => [r.id, r.status])).toEqual([[id, 'compensation_failed']]);
    const detail = await request(server).get(`/redflow/api/run?id=${id}`).expect(200);
    expect(detail.body.run).toMatchObject({
      status: 'compensation_failed',
      error: { name: 'NonRetriableError', message: 'out of stock' },
      compensationError: { name: 'Error', message: 'the refund was refused' },
    });
    refundWorks = true;
    const res = await act(server, id, 'resume');
    expect([res.status, res.body]).toEqual([200, { runId: id }]);
    await eventually(async () => (await engine.client.getRun(id))?.status === 'failed');
    const after = await request(server).get(`/redflow/api/run?id=${id}`).expect(200);
    expect(after.body.run).toMatchObject({ status: 'failed', compensated: true, error: { message: 'out of stock' } });
    expect(after.body.run.compensationError).toBeUndefined();
  });

  it('resume of a canceled run queues it again on its queue', async () => {
    const { id } = await engine.client.runByName('idle', { i: 6 });
    await engine.client.cancelRun(id);
    const res = await act(server, id, 'resume');
    expect([res.status, res.body]).toEqual([200, { runId: id }]);
    expect(await engine.client.getRun(id)).toMatchObject({ workflow: 'idle', queue: 'parked', status: 'queued', input: { i: 6 } });
  });

  it('resume of a run that is not failed or canceled: 409; of a missing run: 404', async () => {
    const done = await engine.client.runByName('ok', { v: 2 });
    await done.result({ timeoutMs: 5000 });
    const conflict = await act(server, done.id, 'resume');
    expect([conflict.status, conflict.body]).toEqual([
      409,
      {
        statusCode: 409,
        code: 'NOT_ENDED_BADLY',
        message: `Run "${done.id}" is succeeded: only failed, canceled, compensation_failed or terminated runs can be resumed.`,
      },
    ]);
    const { id: queuedId } = await engine.client.runByName('idle', { i: 7 });
    const live = await act(server, queuedId, 'resume');
    expect([live.status, live.body.message]).toEqual([
      409,
      `Run "${queuedId}" is queued: only failed, canceled, compensation_failed or terminated runs can be resumed.`,
    ]);
    expect((await engine.client.getRun(queuedId))!.status).toBe('queued');
    expect((await act(server, 'missing', 'resume')).body).toEqual({ statusCode: 404, code: 'RUN_NOT_FOUND', message: 'Run "missing" does not exist.' });
  });
});

@Controller()
class HealthController {
  @Get('health')
  health() {
    return { ok: true };
  }
}

describe('dashboard mounted by RedflowModule (Express)', () => {
  let engine: TestEngine;
  let app: INestApplication | undefined;
  let runId: string;

  beforeAll(async () => {
    engine = new TestEngine();
    engine.registry.define('ok', {}, ({ input }) => input);
    await engine.worker({ logger: silent });
    const handle = await engine.client.runByName('ok', { hello: 'nest' });
    await handle.result({ timeoutMs: 5000 });
    runId = handle.id;
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => engine?.close());

  async function start(dashboard: DashboardOptions): Promise<INestApplication> {
    app = await createNestApp({
      imports: [RedflowModule.forRoot({ app: 'dashboard-test', connection: engine.redis, prefix: engine.prefix, worker: false, dashboard })],
      controllers: [HealthController],
    });
    await app.init();
    return app;
  }

  it('serves the dashboard at its path to requests authorize lets in, and denies the others', async () => {
    const nest = await start({ path: '/ops/redflow', authorize: (req) => req.headers['x-user'] === 'admin' });
    const http = () => request(nest.getHttpServer());
    for (const path of ['/ops/redflow/', '/ops/redflow']) {
      const page = await http().get(path).set('x-user', 'admin').expect(200);
      expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(page.headers['content-security-policy']).toContain("default-src 'self'");
      expect(page.text).toContain('src="/ops/redflow/app.js"');
      expect(page.text).toContain('href="/ops/redflow/app.css"');
    }
    await http().get('/ops/redflow/app.js').set('x-user', 'admin').expect(200).expect('content-type', 'text/javascript; charset=utf-8');

    expect((await http().get('/ops/redflow/api/meta').set('x-user', 'admin').expect(200)).body).toEqual({ readOnly: false, prefix: engine.prefix });
    const runs = (await http().get('/ops/redflow/api/runs').set('x-user', 'admin').expect(200)).body as RunsPage;
    expect(runs.runs.map((r) => [r.id, r.status])).toEqual([[runId, 'succeeded']]);
    const detail = (await http().get(`/ops/redflow/api/run?id=${runId}`).set('x-user', 'admin').expect(200)).body;
    expect(detail.run).toMatchObject({ id: runId });
    expect(JSON.parse(detail.run.output.text)).toEqual({ hello: 'nest' });

    // authorize returned false.
    for (const path of ['/ops/redflow/', '/ops/redflow/api/meta', '/ops/redflow/api/runs']) {
      expect((await http().get(path).expect(403)).body).toMatchObject({ statusCode: 403, code: 'FORBIDDEN' });
    }
    await http().post(`/ops/redflow/api/run/rerun?id=${runId}`).set(SAME_ORIGIN_JSON).set('x-user', 'guest').send({}).expect(403);
    // The resume route reaches the API: a succeeded run is refused with its sentence.
    const token = await pageToken(nest.getHttpServer(), '/ops/redflow/', { 'x-user': 'admin' });
    const resumed = await http()
      .post(`/ops/redflow/api/run/resume?id=${runId}`)
      .set({ ...SAME_ORIGIN_JSON, 'x-user': 'admin', 'x-redflow-csrf': token })
      .send({})
      .expect(409);
    expect(resumed.body).toEqual({
      statusCode: 409,
      code: 'NOT_ENDED_BADLY',
      message: `Run "${runId}" is succeeded: only failed, canceled, compensation_failed or terminated runs can be resumed.`,
    });

    // The app's own routes and 404s are untouched.
    expect((await http().get('/health').expect(200)).body).toEqual({ ok: true });
    expect((await http().get('/redflow/').set('x-user', 'admin').expect(404)).body).toMatchObject({ statusCode: 404 });
  });

  it('an authorize that always returns false denies everything; readOnly refuses actions', async () => {
    const denyAll = await start({ path: '/ops/redflow', authorize: () => false });
    await request(denyAll.getHttpServer()).get('/ops/redflow/api/meta').expect(403);
    await request(denyAll.getHttpServer()).get('/ops/redflow/').expect(403);
    await app!.close();
    app = undefined;

    const ro = await start({ path: '/ops/redflow', authorize: () => true, readOnly: true });
    expect((await request(ro.getHttpServer()).get('/ops/redflow/api/meta').expect(200)).body).toEqual({ readOnly: true, prefix: engine.prefix });
    const { id } = await engine.client.runByName('ok', { x: 1 }, { runAt: Date.now() + 60_000 });
    const page = await request(ro.getHttpServer()).get('/ops/redflow/').expect(200);
    const token = /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text)![1];
    const refused = await request(ro.getHttpServer())
      .post(`/ops/redflow/api/run/cancel?id=${id}`)
      .set({ ...SAME_ORIGIN_JSON, 'x-redflow-csrf': token })
      .send({})
      .expect(403);
    expect(refused.body.code).toBe('READ_ONLY');
    expect((await engine.client.getRun(id))!.status).toBe('scheduled');
    await engine.client.cancelRun(id);
  });
});
