import 'reflect-metadata';
import { Controller, Get, type INestApplication } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import request from 'supertest';
import { createDashboardHandler, RedflowModule, type DashboardOptions, type RedflowLogger, type RunState, type StepState, type WorkflowClient, type WorkflowContext } from '../../lib';
import { nextCronTick } from '../../lib/core/client';
import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * The dashboard's HTTP surface: the page and its assets, the JSON API over the public client,
 * access control (authorize, readOnly, the action header) and the Nest mount. Real Redis, real
 * workers; the browser test covers rendering.
 */

const silent: RedflowLogger = { log() {}, warn() {}, error() {} };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ACTION = { 'x-redflow-action': '1' };
const JSON_TYPE = 'application/json; charset=utf-8';
const XSS = { note: '<script>alert(1)</script>', avatar: '<img src=x onerror=alert(1)>' };

/** A plain Node server around the handler; anything it does not handle is a bare 404. */
function serve(client: WorkflowClient, options: Partial<DashboardOptions> = {}): Server {
  const handler = createDashboardHandler(client, { path: '/redflow', authorize: () => true, ...options });
  return createServer((req, res) => void handler(req, res).then((handled) => handled || res.writeHead(404).end()));
}

interface RunsPage {
  runs: RunState[];
  offset: number;
  limit: number;
  hasMore: boolean;
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
    server = serve(client);
  });

  afterAll(async () => {
    gate.resolve();
    await engine?.close();
  });

  const get = (path: string) => request(server).get(path);

  describe('page and assets', () => {
    it('GET <path>/ serves the page, referencing its script and stylesheet under the path, with a CSP', async () => {
      const res = await get('/redflow/').expect(200);
      expect(res.headers['content-type']).toBe('text/html; charset=utf-8');
      expect(res.headers['content-security-policy']).toContain("default-src 'self'");
      expect(res.headers['content-security-policy']).toContain("script-src 'self'");
      expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.text).toContain('<script src="/redflow/app.js"');
      expect(res.text).toContain('<link rel="stylesheet" href="/redflow/app.css">');
      expect(res.text).toContain('data-base="/redflow"');
      expect(res.text).not.toContain('__BASE__');
    });

    it('GET <path> redirects to <path>/', async () => {
      const res = await get('/redflow').expect(302);
      expect(res.headers.location).toBe('/redflow/');
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
      // Inside the path, an unknown route is the dashboard's JSON 404.
      const missing = await get('/redflow/api/nope').expect(404);
      expect(missing.body).toEqual({ statusCode: 404, message: 'Nothing at GET /redflow/api/nope.' });
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
      expect(res.body.byStatus).toEqual({ scheduled: 1, queued: 4, running: 1, succeeded: 5, failed: 1, canceled: 1 });
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
      // The seeding took well under a minute: normally all of it falls in the current minute.
      if (minuteOf(before) === minuteOf((await engine.client.getRun(ids.ok[0]))!.finishedAt!)) {
        expect(perMinute[59]).toMatchObject({ succeeded: 5, failed: 1 });
      }
    });

    it('workflows: the registered workflows (queue, events, concurrency) and the crons with their next tick', async () => {
      const res = await get('/redflow/api/workflows').expect(200);
      const workflows = res.body.workflows as Array<Record<string, unknown>>;
      expect(workflows.map((w) => w.name)).toEqual(['boom', 'child', 'hold', 'idle', 'ok', 'parent', 'ticker']);
      const byName = Object.fromEntries(workflows.map((w) => [w.name, w]));
      expect(byName.ok).toMatchObject({ queue: 'default', maxAttempts: 1, maxConcurrency: null, events: ['order.placed'], crons: [], owner: 'test-app' });
      expect(byName.boom).toMatchObject({ queue: 'default', maxConcurrency: 1, events: [], crons: [] });
      expect(byName.idle).toMatchObject({ queue: 'parked', events: [] });
      expect(byName.ticker).toMatchObject({ queue: 'parked', crons: ['ticker-yearly'] });
      expect(res.body.crons).toEqual([{ id: 'ticker-yearly', workflow: 'ticker', expression: '0 0 1 1 *', input: { tick: true }, nextAt: expect.any(Number) }]);
      expect(res.body.crons[0].nextAt).toBe(nextCronTick('ticker', { expression: '0 0 1 1 *' }, Date.now()));
    });

    it('runs: newest first, filtered by workflow and status', async () => {
      const ids_ = (page: RunsPage) => page.runs.map((r) => r.id);
      const all = (await get('/redflow/api/runs').expect(200)).body as RunsPage;
      expect(all).toMatchObject({ offset: 0, limit: 25, hasMore: false });
      // Running first; then queued / scheduled by creation time and ended runs by finish time, merged.
      expect(ids_(all)).toEqual([ids.hold, ids.later, ids.idle[0], ids.idle[4], ids.idle[3], ids.idle[2], ids.idle[1], ids.parent, ids.child, ids.boom, ids.xss, ids.ok[1], ids.ok[0]]);

      const ok = (await get('/redflow/api/runs?workflow=ok').expect(200)).body as RunsPage;
      expect(ids_(ok)).toEqual([ids.xss, ids.ok[1], ids.ok[0]]);
      const failed = (await get('/redflow/api/runs?status=failed').expect(200)).body as RunsPage;
      expect(ids_(failed)).toEqual([ids.boom]);
      expect(failed.runs[0]).toMatchObject({ workflow: 'boom', status: 'failed', input: { card: '4000 0000 0000 0002' }, error: { name: 'Error', message: 'card declined' } });
      // Ended runs list by finish time: the child finished before its parent.
      const succeeded = (await get('/redflow/api/runs?status=succeeded').expect(200)).body as RunsPage;
      expect(ids_(succeeded)).toEqual([ids.parent, ids.child, ids.xss, ids.ok[1], ids.ok[0]]);
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

    it('runs: pages with limit and offset, hasMore telling whether another page exists', async () => {
      const page = async (query: string) => (await get(`/redflow/api/runs?${query}`).expect(200)).body as RunsPage;
      const newestIdle = [ids.later, ...[...ids.idle].reverse()]; // by creation time
      const p1 = await page('workflow=idle&limit=4');
      expect(p1).toMatchObject({ offset: 0, limit: 4, hasMore: true });
      expect(p1.runs.map((r) => r.id)).toEqual(newestIdle.slice(0, 4));
      const p2 = await page('workflow=idle&limit=4&offset=4');
      expect(p2).toMatchObject({ offset: 4, limit: 4, hasMore: false });
      expect(p2.runs.map((r) => r.id)).toEqual(newestIdle.slice(4));
      const exact = await page('workflow=idle&limit=6');
      expect(exact.hasMore).toBe(false);
      expect(exact.runs).toHaveLength(6);

      const queued = [ids.idle[4], ids.idle[3], ids.idle[2], ids.idle[1]];
      const q1 = await page('workflow=idle&status=queued&limit=3');
      expect(q1).toMatchObject({ offset: 0, limit: 3, hasMore: true });
      expect(q1.runs.map((r) => r.id)).toEqual(queued.slice(0, 3));
      const q2 = await page('workflow=idle&status=queued&limit=3&offset=3');
      expect(q2).toMatchObject({ offset: 3, limit: 3, hasMore: false });
      expect(q2.runs.map((r) => r.id)).toEqual(queued.slice(3));

      // Across workflows (merged status indexes) too.
      const s1 = await page('status=succeeded&limit=2&offset=1');
      expect(s1).toMatchObject({ offset: 1, limit: 2, hasMore: true });
      expect(s1.runs.map((r) => r.id)).toEqual([ids.child, ids.xss]);
      const s2 = await page('status=succeeded&limit=2&offset=3');
      expect(s2).toMatchObject({ offset: 3, limit: 2, hasMore: false });
      expect(s2.runs.map((r) => r.id)).toEqual([ids.ok[1], ids.ok[0]]);
      const beyond = await page('limit=5&offset=100');
      expect(beyond).toEqual({ runs: [], offset: 100, limit: 5, hasMore: false });
      // limit is capped at 200.
      expect((await page('limit=5000')).limit).toBe(200);
    });

    it('runs: 400 for an unknown status or a limit / offset that is not a whole number >= 0', async () => {
      const bad = async (query: string) => (await get(`/redflow/api/runs?${query}`).expect(400).expect('content-type', JSON_TYPE)).body;
      expect(await bad('status=done')).toEqual({
        statusCode: 400,
        message: 'Unknown status "done". Use one of scheduled, queued, running, succeeded, failed, canceled.',
      });
      expect(await bad('limit=-1')).toEqual({ statusCode: 400, message: 'Expected a whole number >= 0, got "-1".' });
      expect(await bad('limit=ten')).toEqual({ statusCode: 400, message: 'Expected a whole number >= 0, got "ten".' });
      expect(await bad('limit=2.5')).toEqual({ statusCode: 400, message: 'Expected a whole number >= 0, got "2.5".' });
      expect(await bad('offset=-3')).toEqual({ statusCode: 400, message: 'Expected a whole number >= 0, got "-3".' });
    });

    it('runs/:id: the run, its steps and its children; a child names its parent', async () => {
      const res = await get(`/redflow/api/runs/${ids.parent}`).expect(200);
      const body = res.body as { run: RunState; steps: StepState[]; children: string[] };
      expect(body.run).toMatchObject({ id: ids.parent, workflow: 'parent', queue: 'default', status: 'succeeded', input: { n: 21 }, output: { doubled: 42 }, attempt: 1 });
      expect(body.run.parentId).toBeUndefined();
      expect(body.steps).toEqual([expect.objectContaining({ name: 'kid', status: 'succeeded', output: 42, seq: 1, attempt: 1 })]);
      expect(body.children).toEqual([ids.child]);

      const child = (await get(`/redflow/api/runs/${ids.child}`).expect(200)).body as { run: RunState; steps: StepState[]; children: string[] };
      expect(child.run).toMatchObject({ id: ids.child, workflow: 'child', status: 'succeeded', input: { n: 21 }, output: 42, parentId: ids.parent });
      expect(child.steps).toEqual([]);
      expect(child.children).toEqual([]);

      const failed = (await get(`/redflow/api/runs/${ids.boom}`).expect(200)).body as { run: RunState };
      expect(failed.run).toMatchObject({ status: 'failed', error: { name: 'Error', message: 'card declined' } });
      const canceled = (await get(`/redflow/api/runs/${ids.idle[0]}`).expect(200)).body as { run: RunState };
      expect(canceled.run).toMatchObject({ status: 'canceled', cancelReason: 'not needed' });
    });

    it('runs/:id: 404 with a message for a run that does not exist', async () => {
      const res = await get('/redflow/api/runs/no-such-run').expect(404);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.body).toEqual({ statusCode: 404, message: 'Run "no-such-run" does not exist.' });
      // Encoded ids are decoded once.
      expect((await get('/redflow/api/runs/a%20b').expect(404)).body.message).toBe('Run "a b" does not exist.');
    });

    it('runs/:id: a malformed percent-encoding in the id is a 400, not a 500', async () => {
      const expected = { statusCode: 400, message: 'The run id in the URL is not valid percent-encoding.' };
      expect((await get('/redflow/api/runs/%E0%A4%A').expect(400).expect('content-type', JSON_TYPE)).body).toEqual(expected);
      expect((await request(server).post('/redflow/api/runs/%ZZ/cancel').set(ACTION).expect(400)).body).toEqual(expected);
    });

    it('returns markup in run data as JSON (escaped by the page, never served as HTML)', async () => {
      const res = await get(`/redflow/api/runs/${ids.xss}`).expect(200);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.headers['x-content-type-options']).toBe('nosniff');
      expect(res.headers['content-security-policy']).toContain("script-src 'self'");
      expect(res.body.run.input).toEqual(XSS);
      expect(res.body.run.output).toEqual(XSS);
      expect(res.text).toContain(JSON.stringify(XSS));
      const list = await get('/redflow/api/runs?workflow=ok').expect(200);
      expect(list.headers['content-type']).toBe(JSON_TYPE);
      expect(list.body.runs[0].input).toEqual(XSS);
    });
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

  it('authorize returning false: 403 for the page, the assets, the API and the actions', async () => {
    const seen: IncomingMessage[] = [];
    const server = serve(engine.client, {
      authorize: (req) => {
        seen.push(req);
        return false;
      },
    });
    const denied = { statusCode: 403, message: 'Access to the dashboard was denied by its authorize function.' };
    for (const path of ['/redflow/', '/redflow/app.js', '/redflow/api/meta', '/redflow/api/overview', '/redflow/api/runs', `/redflow/api/runs/${queuedId}`]) {
      const res = await request(server).get(path).expect(403);
      expect(res.headers['content-type']).toBe(JSON_TYPE);
      expect(res.body).toEqual(denied);
    }
    for (const action of ['cancel', 'rerun']) {
      expect((await request(server).post(`/redflow/api/runs/${queuedId}/${action}`).set(ACTION).expect(403)).body).toEqual(denied);
    }
    expect(seen.length).toBe(8);
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

  it('an authorize that throws denies with a 500, showing nothing', async () => {
    const server = serve(engine.client, {
      authorize: () => {
        throw new Error('session store down');
      },
    });
    const res = await request(server).get('/redflow/api/runs').expect(500);
    expect(res.body).toEqual({ statusCode: 500, message: 'session store down' });
  });
});

describe('dashboard actions', () => {
  let engine: TestEngine;
  let server: Server;
  let readOnly: Server;
  const post = (srv: Server, id: string, action: 'cancel' | 'rerun') => request(srv).post(`/redflow/api/runs/${encodeURIComponent(id)}/${action}`);

  beforeAll(async () => {
    engine = new TestEngine();
    engine.registry.define('ok', {}, ({ input }) => input);
    engine.registry.define('boom', {}, () => {
      throw new Error('always fails');
    });
    engine.registry.define('idle', { queue: 'parked' }, () => 'never runs');
    await engine.worker({ queues: ['default'], logger: silent });
    server = serve(engine.client);
    readOnly = serve(engine.client, { readOnly: true });
  });
  afterAll(() => engine?.close());

  it('cancel: cancels a queued run ({ canceled: true }); a second cancel answers { canceled: false }', async () => {
    const { id } = await engine.client.runByName('idle', { i: 1 });
    const res = await post(server, id, 'cancel').set(ACTION).expect(200);
    expect(res.headers['content-type']).toBe(JSON_TYPE);
    expect(res.body).toEqual({ canceled: true });
    expect(await engine.client.getRun(id)).toMatchObject({ status: 'canceled', cancelReason: 'canceled from the dashboard' });
    expect((await post(server, id, 'cancel').set(ACTION).expect(200)).body).toEqual({ canceled: false });
  });

  it('actions need the x-redflow-action header (400 without it, nothing changes)', async () => {
    const { id } = await engine.client.runByName('idle', { i: 2 });
    const expected = { statusCode: 400, message: 'Actions need the header "x-redflow-action: 1".' };
    expect((await post(server, id, 'cancel').expect(400)).body).toEqual(expected);
    expect((await post(server, id, 'cancel').set('x-redflow-action', 'yes').expect(400)).body).toEqual(expected);
    // A cross-site form post carries no custom header.
    expect((await post(server, id, 'cancel').type('form').send('x=1').expect(400)).body).toEqual(expected);
    expect((await engine.client.getRun(id))!.status).toBe('queued');
    // GET is not an action.
    expect((await request(server).get(`/redflow/api/runs/${id}/cancel`).expect(404)).body.message).toBe(`Nothing at GET /redflow/api/runs/${id}/cancel.`);
  });

  it('readOnly: meta says so, and cancel and re-run are refused with 403, changing nothing', async () => {
    const queued = await engine.client.runByName('idle', { i: 3 });
    const failed = await engine.client.runByName('boom', { i: 3 });
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('always fails');
    const before = (await engine.client.listRuns()).map((r) => r.id);
    expect((await request(readOnly).get('/redflow/api/meta').expect(200)).body).toEqual({ readOnly: true, prefix: engine.prefix });
    const refused = { statusCode: 403, message: 'The dashboard is read-only: actions are disabled.' };
    expect((await post(readOnly, queued.id, 'cancel').set(ACTION).expect(403)).body).toEqual(refused);
    expect((await post(readOnly, failed.id, 'rerun').set(ACTION).expect(403)).body).toEqual(refused);
    expect((await engine.client.getRun(queued.id))!.status).toBe('queued');
    expect((await engine.client.listRuns()).map((r) => r.id)).toEqual(before);
  });

  it('re-run of a failed run: 201 with the id of a new run of the same workflow and input', async () => {
    const input = { order: 'ord_1', items: [1, 2], note: 'retry me' };
    const failed = await engine.client.runByName('boom', input);
    await expect(failed.result({ timeoutMs: 5000 })).rejects.toThrow('always fails');
    const res = await post(server, failed.id, 'rerun').set(ACTION).expect(201);
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
    const { runId } = (await post(server, id, 'rerun').set(ACTION).expect(201)).body as { runId: string };
    expect(await engine.client.getRun(runId)).toMatchObject({ workflow: 'idle', queue: 'parked', status: 'queued', input: { i: 4 } });
  });

  it('re-run of a run that is not failed or canceled: 409; of a missing run: 404', async () => {
    const done = await engine.client.runByName('ok', { v: 1 });
    await done.result({ timeoutMs: 5000 });
    const before = (await engine.client.listRuns({ limit: 200 })).length;
    expect((await post(server, done.id, 'rerun').set(ACTION).expect(409)).body).toEqual({
      statusCode: 409,
      message: `Run "${done.id}" is succeeded: only failed or canceled runs can be re-run.`,
    });
    const { id: queuedId } = await engine.client.runByName('idle', { i: 5 });
    expect((await post(server, queuedId, 'rerun').set(ACTION).expect(409)).body.message).toBe(`Run "${queuedId}" is queued: only failed or canceled runs can be re-run.`);
    expect((await engine.client.listRuns({ limit: 200 })).length).toBe(before + 1);
    expect((await post(server, 'missing', 'rerun').set(ACTION).expect(404)).body).toEqual({ statusCode: 404, message: 'Run "missing" does not exist.' });
    expect((await post(server, 'missing', 'cancel').set(ACTION).expect(404)).body).toEqual({ statusCode: 404, message: 'Run "missing" does not exist.' });
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
    const module = await Test.createTestingModule({
      imports: [RedflowModule.forRoot({ app: 'dashboard-test', connection: engine.redis, prefix: engine.prefix, worker: false, dashboard })],
      controllers: [HealthController],
    }).compile();
    app = module.createNestApplication({ logger: false });
    await app.init();
    return app;
  }

  it('serves the dashboard at its path to requests authorize lets in, and denies the others', async () => {
    const nest = await start({ path: '/ops/redflow', authorize: (req) => req.headers['x-user'] === 'admin' });
    const http = () => request(nest.getHttpServer());
    const page = await http().get('/ops/redflow/').set('x-user', 'admin').expect(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.text).toContain('src="/ops/redflow/app.js"');
    expect(page.text).toContain('href="/ops/redflow/app.css"');
    expect((await http().get('/ops/redflow').expect(302)).headers.location).toBe('/ops/redflow/');
    await http().get('/ops/redflow/app.js').set('x-user', 'admin').expect(200).expect('content-type', 'text/javascript; charset=utf-8');

    expect((await http().get('/ops/redflow/api/meta').set('x-user', 'admin').expect(200)).body).toEqual({ readOnly: false, prefix: engine.prefix });
    const runs = (await http().get('/ops/redflow/api/runs').set('x-user', 'admin').expect(200)).body as RunsPage;
    expect(runs.runs.map((r) => [r.id, r.status, r.input])).toEqual([[runId, 'succeeded', { hello: 'nest' }]]);
    expect((await http().get(`/ops/redflow/api/runs/${runId}`).set('x-user', 'admin').expect(200)).body.run).toMatchObject({ id: runId, output: { hello: 'nest' } });

    // Default deny: authorize returned false.
    for (const path of ['/ops/redflow/', '/ops/redflow/api/meta', '/ops/redflow/api/runs']) {
      expect((await http().get(path).expect(403)).body).toEqual({ statusCode: 403, message: 'Access to the dashboard was denied by its authorize function.' });
    }
    await http().post(`/ops/redflow/api/runs/${runId}/rerun`).set(ACTION).set('x-user', 'guest').expect(403);

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
    await request(ro.getHttpServer()).post(`/ops/redflow/api/runs/${id}/cancel`).set(ACTION).expect(403);
    expect((await engine.client.getRun(id))!.status).toBe('scheduled');
    await engine.client.cancelRun(id);
  });
});
