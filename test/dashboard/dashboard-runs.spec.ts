import { createServer, type Server } from 'node:http';
import request from 'supertest';

import { createDashboardHandler, NonRetriableError, type DashboardOptions, type RedflowLogger, type WorkflowContext } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * The dashboard's run list filters (version, queue, creation time, search, order, cursors,
 * totals), the ids of a filter, bulk actions, signals, cancel with compensation, a run's detail
 * (values, patches, deadline, waits, compensation) and its history from the event stream: over
 * HTTP, on a real Redis with real workers.
 */

const silent: RedflowLogger = { log() {}, warn() {}, error() {} };
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const SAME_ORIGIN_JSON = { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' };

function serve(engine: TestEngine, options: Partial<DashboardOptions> = {}): Server {
  const handler = createDashboardHandler(engine.client, { path: '/redflow', authorize: () => true, ...options }, silent);
  return createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => void handler(req, res).then((handled) => handled || res.writeHead(404).end()));
}

async function token(server: Server): Promise<string> {
  const page = await request(server).get('/redflow/').expect(200);
  return /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text)![1];
}

interface Row {
  id: string;
  status: string;
  version: number;
  createdAt: number;
}

describe('dashboard API: runs, bulk actions, signals, detail and history', () => {
  let engine: TestEngine;
  let server: Server;
  const gate = deferred();
  const ids = {} as { parkedV2: string[]; parkedV1: string; boom: string[]; ok: string[]; idem: string; waiter: string; hold: string };
  let middle = 0;

  beforeAll(async () => {
    engine = new TestEngine();
    const { registry, client } = engine;
    const ok = registry.define('ok', {}, ({ input }) => input);
    const boom = registry.define('boom', {}, ({ input }: WorkflowContext<{ why: string }>) => {
      throw new NonRetriableError(input.why);
    });
    const parked = registry.define('parked', { queue: 'parked', version: 2 }, () => 'never runs');
    registry.define('waiter', { timeout: '1h' }, async (ctx) => {
      await ctx.setEvent('stage', { at: 'waiting', password: 'hunter2' });
      const patched = ctx.step.patched('new-path');
      const approval = await ctx.step.waitForSignal('approval', 'approve', { timeout: '1h' });
      return { approval, patched };
    });
    registry.define('hold', {}, async () => {
      await gate.promise;
      return 'released';
    });
    await engine.worker({ queues: ['default'], logger: silent });

    ids.ok = [];
    for (let n = 0; n < 3; n++) {
      const handle = await client.start(ok, { n });
      await handle.result({ timeoutMs: 5000 });
      ids.ok.push(handle.id);
      await pause(3);
    }
    const idem = await client.start(ok, { n: 'idem' }, { idempotencyKey: 'order-4711' });
    await idem.result({ timeoutMs: 5000 });
    ids.idem = idem.id;
    ids.boom = [];
    for (const why of ['card declined', 'address unknown']) {
      const handle = await client.start(boom, { why });
      await expect(handle.result({ timeoutMs: 5000 })).rejects.toThrow(why);
      ids.boom.push(handle.id);
      await pause(3);
    }
    ids.parkedV2 = [];
    ids.parkedV2.push((await client.start(parked, { i: 0 })).id);
    await pause(5);
    middle = Date.now();
    await pause(5);
    ids.parkedV1 = (await client.start(parked, { i: 'v1' }, { version: 1 })).id;
    await pause(3);
    ids.parkedV2.push((await client.start(parked, { i: 1 })).id);
    ids.waiter = (await client.runByName('waiter', {})).id;
    ids.hold = (await client.runByName('hold', {})).id;
    await eventually(async () => (await client.getRun(ids.waiter))?.status === 'scheduled' && (await client.getRun(ids.hold))?.status === 'running');
    server = serve(engine);
  });

  afterAll(async () => {
    gate.resolve();
    await engine?.close();
  });

  const get = (path: string) => request(server).get(`/redflow${path}`);
  const rows = async (query: string) =>
    (await get(`/api/runs?${query}`).expect(200)).body as { runs: Row[]; nextCursor: string | null; totals: Record<string, number>; search?: unknown };
  const idsOf = (page: { runs: Row[] }) => page.runs.map((r) => r.id);

  describe('GET /api/runs', () => {
    it('filters by version (with workflow), by queue (the workflows registered on it) and by creation time', async () => {
      expect(idsOf(await rows('workflow=parked&version=2'))).toEqual([ids.parkedV2[1], ids.parkedV2[0]]);
      expect(idsOf(await rows('workflow=parked&version=1'))).toEqual([ids.parkedV1]);
      expect(idsOf(await rows('queue=parked'))).toEqual([ids.parkedV2[1], ids.parkedV1, ids.parkedV2[0]]);
      expect(idsOf(await rows('queue=parked&workflow=ok'))).toEqual([]);
      expect(idsOf(await rows('queue=nowhere'))).toEqual([]);
      expect(idsOf(await rows(`queue=parked&from=${middle}`))).toEqual([ids.parkedV2[1], ids.parkedV1]);
      expect(idsOf(await rows(`queue=parked&to=${middle}`))).toEqual([ids.parkedV2[0]]);
      // Ended runs are scored by finish time: the creation time is checked on each run.
      expect(idsOf(await rows(`workflow=ok&status=succeeded&to=${middle}`))).toEqual([ids.idem, ...[...ids.ok].reverse()]);
      expect(idsOf(await rows(`status=succeeded&from=${middle}`))).toEqual([]);
      const bad = (query: string) => get(`/api/runs?${query}`).expect(400);
      expect((await bad('version=2')).body.message).toBe('The query parameter "version" needs "workflow": versions are per workflow.');
      expect((await bad('workflow=parked&version=0')).body.message).toContain('"version"');
      expect((await bad(`from=${middle}&to=${middle}`)).body.message).toBe('The query parameter "from" must be before "to".');
      expect((await bad('from=yesterday')).body.message).toBe('The query parameter "from" must be a time in epoch ms.');
    });

    it('orders newest or oldest first, and pages with an opaque cursor that belongs to its filter; offset still works', async () => {
      expect(idsOf(await rows('workflow=ok&order=oldest'))).toEqual([...ids.ok, ids.idem]);
      const walk = async (query: string) => {
        const seen: string[] = [];
        let cursor: string | null = '';
        while (cursor !== null) {
          const page = await rows(`${query}&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
          expect(page.runs.length).toBeLessThanOrEqual(2);
          seen.push(...idsOf(page));
          cursor = page.nextCursor;
        }
        return seen;
      };
      expect(await walk('workflow=ok')).toEqual([ids.idem, ...[...ids.ok].reverse()]);
      expect(await walk('workflow=ok&order=oldest')).toEqual([...ids.ok, ids.idem]);
      const all = idsOf(await rows('limit=100'));
      expect(await walk('x=1')).toEqual(all);
      expect(await walk('order=oldest')).toEqual(expect.arrayContaining(all));
      expect(await walk(`queue=parked&from=${middle}`)).toEqual([ids.parkedV2[1], ids.parkedV1]);
      const first = await rows('workflow=ok&limit=2');
      expect((await get(`/api/runs?workflow=boom&cursor=${first.nextCursor}`).expect(400)).body.message).toBe(
        'The query parameter "cursor" belongs to other filters: start again without it.',
      );
      expect((await get('/api/runs?cursor=nonsense').expect(400)).body.message).toBe(
        'The query parameter "cursor" is not a cursor this dashboard gave: start again without it.',
      );
      expect((await get('/api/runs?workflow=ok&limit=2&offset=2').expect(200)).body).toMatchObject({
        offset: 2,
        hasMore: false,
        runs: [{ id: ids.ok[1] }, { id: ids.ok[0] }],
      });
    });

    it('totals: runs per status under the workflow (or queue) filter', async () => {
      expect((await rows('workflow=ok')).totals).toEqual({
        scheduled: 0,
        queued: 0,
        running: 0,
        compensating: 0,
        succeeded: 4,
        failed: 0,
        canceled: 0,
        compensation_failed: 0,
        terminated: 0,
      });
      expect((await rows('queue=parked&status=failed')).totals).toMatchObject({ queued: 3, succeeded: 0 });
      expect((await rows('')).totals).toMatchObject({ succeeded: 4, failed: 2, queued: 3, scheduled: 1, running: 1 });
    });

    it('q: an exact run id, an exact idempotency key, else text in the errors of recent failed runs', async () => {
      const byId = await rows(`q=${ids.parkedV1}&workflow=ok`);
      expect(byId).toMatchObject({ runs: [{ id: ids.parkedV1 }], search: { by: 'id', scanned: 1 }, nextCursor: null });
      const byKey = await rows('q=order-4711');
      expect(byKey.runs.map((r) => r.id)).toEqual([ids.idem]);
      expect(byKey.search).toEqual({ by: 'idempotencyKey', scanned: expect.any(Number) });
      expect((await rows('q=order-4711&workflow=ok')).search).toEqual({ by: 'idempotencyKey', scanned: 1 });
      const byError = await rows('q=DECLINED');
      expect(byError).toMatchObject({ runs: [{ id: ids.boom[0], status: 'failed' }], search: { by: 'error', scanned: 2 }, nextCursor: null });
      expect((await rows('q=nothing like it')).runs).toEqual([]);
      expect((await rows('q=unknown&workflow=ok')).runs).toEqual([]);
    });

    it('waiting: the forms the engine takes, else 400 (and not with order=oldest)', async () => {
      const bad = async (query: string) => (await get(`/api/runs?${query}`).expect(400)).body.message as string;
      for (const value of ['nap', 'signal:', 'event: x', 'timer']) expect(await bad(`waiting=${encodeURIComponent(value)}`)).toContain('"waiting"');
      expect(await bad('waiting=signal&order=oldest')).toContain('order=oldest');
    });
  });

  describe('GET /api/runs/ids', () => {
    it('answers the ids a filter selects, pages of up to 500 with a cursor, and the total', async () => {
      const all = (await get('/api/runs/ids?queue=parked').expect(200)).body;
      expect(all).toEqual({ ids: [ids.parkedV2[1], ids.parkedV1, ids.parkedV2[0]], nextCursor: null, total: 3, totalExact: true });
      const first = (await get('/api/runs/ids?queue=parked&limit=2').expect(200)).body;
      expect(first.ids).toEqual([ids.parkedV2[1], ids.parkedV1]);
      const rest = (await get(`/api/runs/ids?queue=parked&limit=2&cursor=${first.nextCursor}`).expect(200)).body;
      expect(rest).toEqual({ ids: [ids.parkedV2[0]], nextCursor: null, total: 3, totalExact: true });
      expect((await get('/api/runs/ids?workflow=parked&version=2').expect(200)).body).toEqual({
        ids: [ids.parkedV2[1], ids.parkedV2[0]],
        nextCursor: null,
        total: 3,
        totalExact: false,
      });
    });
  });

  describe('actions', () => {
    const post = async (path: string, options: { token?: boolean; to?: Server } = {}) => {
      const to = options.to ?? server;
      const headers = options.token === false ? SAME_ORIGIN_JSON : { ...SAME_ORIGIN_JSON, 'x-redflow-csrf': await token(to) };
      return request(to).post(`/redflow${path}`).set(headers).send({});
    };

    it('POST /api/run/signal sends a signal with a JSON payload; 400 for a payload that is not JSON or over 16 KiB', async () => {
      expect((await post(`/api/run/signal?id=${ids.waiter}&name=approve&payload=${encodeURIComponent('{"by":"ops"')}`)).status).toBe(400);
      const notJson = await post(`/api/run/signal?id=${ids.waiter}&name=approve&payload=yes`);
      expect([notJson.status, notJson.body.message]).toEqual([400, 'The query parameter "payload" must be JSON text, such as {"approved":true}, "yes" or 42.']);
      const big = await post(`/api/run/signal?id=${ids.waiter}&name=approve&payload=${encodeURIComponent(JSON.stringify('x'.repeat(16 * 1024)))}`);
      expect([big.status, big.body.message]).toEqual([400, 'The query parameter "payload" must be at most 16 KiB of JSON text.']);
      expect((await post(`/api/run/signal?id=${ids.waiter}&payload=1`)).status).toBe(400);
      expect((await post('/api/run/signal?id=no-such-run&name=approve')).status).toBe(404);
      expect((await post(`/api/run/signal?id=${ids.waiter}&name=approve`, { token: false })).status).toBe(403);

      // Before the signal: the run's detail shows its wait, value, patch and deadline.
      const detail = (await get(`/api/run?id=${ids.waiter}`).expect(200)).body;
      expect(detail.values).toEqual({
        stage: { text: JSON.stringify({ at: 'waiting', password: '***' }, null, 2), bytes: expect.any(Number), truncated: false },
      });
      expect(detail.patches).toEqual({ 'new-path': true });
      expect(detail.deadline).toBeGreaterThan(Date.now() + 3_000_000);
      expect(detail.waits).toEqual([{ step: 'approval', kind: 'signal', name: 'approve', deadline: expect.any(Number) }]);
      expect(detail.compensation).toBeNull();

      const sent = await post(`/api/run/signal?id=${ids.waiter}&name=approve&payload=${encodeURIComponent('{"by":"ops"}')}`);
      expect([sent.status, sent.body]).toEqual([200, { sent: true }]);
      await expect(engine.client.waitForRun(ids.waiter, { timeoutMs: 5000 })).resolves.toEqual({ approval: { by: 'ops' }, patched: true });
      expect((await get(`/api/run?id=${ids.waiter}`).expect(200)).body.waits).toEqual([]);
    });

    it('GET /api/run/history: the run events of the stream, oldest first', async () => {
      const history = (await get(`/api/run/history?id=${ids.waiter}`).expect(200)).body;
      expect(history.complete).toBe(true);
      expect(history.scanned).toBeGreaterThan(0);
      expect(history.events.map((e: { type: string }) => e.type)).toEqual([
        'run.created',
        'run.started',
        'run.waiting',
        'run.signaled',
        'run.started',
        'run.completed',
      ]);
      expect(history.events.every((e: { runId: string }) => e.runId === ids.waiter)).toBe(true);
      expect((await get('/api/run/history').expect(400)).body.message).toBe('Give the run id as the query parameter "id".');
    });

    it('POST /api/runs/bulk acts on each run on its own, skipping with a reason the runs the action does not apply to', async () => {
      const bulk = await post(`/api/runs/bulk?action=cancel&ids=${[ids.parkedV2[0], ids.ok[0], 'no-such-run', ids.parkedV2[0]].join(',')}`);
      expect(bulk.status).toBe(200);
      expect(bulk.body).toEqual({
        action: 'cancel',
        done: [ids.parkedV2[0]],
        skipped: [
          { id: ids.ok[0], reason: 'it is succeeded: only queued, scheduled or running runs can be canceled' },
          { id: 'no-such-run', reason: 'no such run' },
        ],
      });
      expect((await engine.client.getRun(ids.parkedV2[0]))?.status).toBe('canceled');
      const rerun = (await post(`/api/runs/bulk?action=rerun&ids=${ids.parkedV2[0]},${ids.parkedV1}`)).body;
      expect(rerun).toMatchObject({ action: 'rerun', done: [ids.parkedV2[0]], started: { [ids.parkedV2[0]]: expect.any(String) } });
      expect(rerun.skipped).toEqual([{ id: ids.parkedV1, reason: 'it is queued: only failed, canceled or terminated runs can be re-run' }]);
      const deleted = (await post(`/api/runs/bulk?action=delete&ids=${ids.parkedV2[0]},${ids.parkedV1}`)).body;
      expect(deleted).toEqual({
        action: 'delete',
        done: [ids.parkedV2[0]],
        skipped: [{ id: ids.parkedV1, reason: 'it is queued: only ended runs can be deleted in bulk (terminate it first)' }],
      });
      expect(await engine.client.getRun(ids.parkedV2[0])).toBeNull();
      const terminate = (await post(`/api/runs/bulk?action=terminate&ids=${ids.parkedV1}`)).body;
      expect(terminate).toEqual({ action: 'terminate', done: [ids.parkedV1], skipped: [] });
      expect((await post(`/api/runs/bulk?action=resume&ids=${ids.parkedV1},${ids.ok[1]}`)).body).toEqual({
        action: 'resume',
        done: [ids.parkedV1],
        skipped: [{ id: ids.ok[1], reason: 'it is succeeded: only failed, canceled, compensation_failed or terminated runs can be resumed' }],
      });

      const bad = async (query: string) => (await post(`/api/runs/bulk?${query}`)).body.message as string;
      expect(await bad('action=explode&ids=a')).toBe('The query parameter "action" must be one of cancel, terminate, resume, rerun, delete.');
      expect(await bad('action=cancel')).toBe('Give the run ids as the query parameter "ids", comma-separated.');
      expect(await bad(`action=cancel&ids=${Array.from({ length: 101 }, (_, i) => `r${i}`).join(',')}`)).toContain('at most 100 ids');
      expect((await post(`/api/runs/bulk?action=cancel&ids=${ids.parkedV1}`, { token: false })).status).toBe(403);
      const readOnly = serve(engine, { readOnly: true });
      const refused = await post(`/api/runs/bulk?action=cancel&ids=${ids.parkedV1}`, { to: readOnly });
      expect([refused.status, refused.body.code]).toEqual([403, 'READ_ONLY']);
    });

    it('POST /api/run/cancel with compensate=1 runs the compensations of the completed steps', async () => {
      const compensated: string[] = [];
      const registry = engine.registry;
      registry.define('saga', { queue: 'sagas' }, async ({ step }) => {
        await step.run({ name: 'charge', compensate: () => void compensated.push('charge') }, () => 'charged');
        await step.waitForSignal('wait', 'never');
      });
      await engine.worker({ queues: ['sagas'], logger: silent });
      const handle = await engine.client.runByName('saga', {});
      await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
      const before = (await get(`/api/run?id=${handle.id}`).expect(200)).body;
      expect(before.compensation).toEqual({ state: 'none', steps: [{ step: 'charge', state: 'due' }] });
      expect((await post(`/api/run/cancel?id=${handle.id}&compensate=maybe`)).status).toBe(400);
      expect((await post(`/api/run/cancel?id=${handle.id}&compensate=1`)).body).toEqual({ canceled: true });
      await eventually(async () => (await engine.client.getRun(handle.id))?.compensated === true);
      expect(compensated).toEqual(['charge']);
      const after = (await get(`/api/run?id=${handle.id}`).expect(200)).body;
      expect(after.compensation).toMatchObject({ state: 'done', steps: [{ step: 'charge', state: 'done' }] });
    });
  });
});
