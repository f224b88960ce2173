import { createServer, type Server } from 'node:http';
import request from 'supertest';

import { createDashboardHandler, NonRetriableError, WorkflowRegistry, type RedflowLogger, type Worker } from '../../lib';
import { nextCronTick } from '../../lib/core/definition/cron';
import { eventually, TestEngine } from '../support/engine';

/**
 * The dashboard's fleet routes over HTTP, on a real Redis with real workers: queues (with runs
 * ended in the last 5 minutes), live workers, workflow versions (and those with runs but no
 * worker), schedules (next ticks, last runs) and starting a schedule's workflow now.
 */

const silent: RedflowLogger = { log() {}, warn() {}, error() {} };
const SAME_ORIGIN_JSON = { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' };

describe('dashboard API: queues, workers, versions, schedules', () => {
  let engine: TestEngine;
  let server: Server;
  let v1: Worker;
  let v2: Worker;
  let waiting: string;

  beforeAll(async () => {
    engine = new TestEngine();
    const handler = createDashboardHandler(engine.client, { path: '/redflow', authorize: () => true }, silent);
    server = createServer((req, res) => void handler(req, res).then((handled) => handled || res.writeHead(404).end()));
    const first = new WorkflowRegistry();
    first.define('checkout', { version: 1 }, async ({ step }) => step.waitForSignal('go', 'go'));
    first.define('ok', { cron: [{ id: 'ok-yearly', expression: '0 0 1 1 *', input: { secret: 'x' } }] }, ({ input }) => input);
    first.define('boom', {}, () => {
      throw new NonRetriableError('no');
    });
    first.define('parked', { queue: 'parked' }, () => 'never runs');
    v1 = await engine.worker({ registry: first, queues: ['default'], logger: silent });
    const ok = await engine.client.runByName('ok', { n: 1 });
    await ok.result({ timeoutMs: 5000 });
    await expect((await engine.client.runByName('boom', {})).result({ timeoutMs: 5000 })).rejects.toThrow('no');
    await engine.client.runByName('parked', {});
    waiting = (await engine.client.runByName('checkout', {})).id;
    await eventually(async () => (await engine.client.getRun(waiting))?.status === 'scheduled');
    const second = new WorkflowRegistry();
    second.define('checkout', { version: 2 }, async ({ step }) => step.waitForSignal('go', 'go'));
    v2 = await engine.worker({ app: 'checkout-v2', registry: second, queues: ['default'], logger: silent });
  });

  afterAll(() => engine?.close());

  const get = (path: string) => request(server).get(`/redflow${path}`);

  it('GET /api/queues: depths per queue with the runs ended in the last 5 minutes, not paused', async () => {
    const { queues } = (await get('/api/queues').expect(200)).body;
    expect(queues).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ queue: 'default', queued: 0, ended5m: 2, paused: false, workflows: ['boom', 'ok'] }),
        expect.objectContaining({ queue: 'parked', queued: 1, running: 0, ended5m: 0, paused: false, workflows: ['parked'] }),
      ]),
    );
  });

  it('POST /api/queues/pause and /resume: a paused queue lists as paused with its note; the token is required', async () => {
    const page = await request(server).get('/redflow/').expect(200);
    const token = /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text)![1];
    const action = (path: string, query: string, headers: Record<string, string> = { ...SAME_ORIGIN_JSON, 'x-redflow-csrf': token }) =>
      request(server).post(`/redflow/api/queues/${path}?${query}`).set(headers).send({});
    const paused = await action('pause', 'queue=parked&note=vendor%20outage');
    expect(paused.status).toBe(200);
    expect(paused.body).toEqual({ queue: 'parked', paused: true, changed: true });
    const parked = (await get('/api/queues').expect(200)).body.queues.find((q: { queue: string }) => q.queue === 'parked');
    expect(parked).toMatchObject({ paused: true, pause: { note: 'vendor outage', at: expect.any(Number) } });
    expect((await action('resume', 'queue=parked')).body).toEqual({ queue: 'parked', paused: false, changed: true });
    expect((await get('/api/queues').expect(200)).body.queues.find((q: { queue: string }) => q.queue === 'parked').paused).toBe(false);
    expect((await action('pause', '')).status).toBe(400);
    expect((await action('pause', 'queue=parked', SAME_ORIGIN_JSON)).status).toBe(403);
    expect((await engine.client.getQueueStats({ queues: ['parked'] }))[0].paused).toBeUndefined();
  });

  it('GET /api/workers: the live workers with what they serve', async () => {
    const { workers } = (await get('/api/workers').expect(200)).body;
    expect(workers.map((w: { workerId: string }) => w.workerId).sort()).toEqual([v1.workerId, v2.workerId].sort());
    expect(workers.find((w: { workerId: string }) => w.workerId === v2.workerId)).toMatchObject({
      pid: process.pid,
      queues: ['default'],
      versions: [{ workflow: 'checkout', version: 2 }],
      active: 0,
    });
  });

  it('GET /api/versions: versions with live workers and unfinished runs; missing once no worker serves a version with runs', async () => {
    let checkout = (await get('/api/versions').expect(200)).body.workflows.find((w: { name: string }) => w.name === 'checkout');
    expect(checkout).toEqual({
      name: 'checkout',
      queue: 'default',
      latest: 2,
      versions: [
        { version: 1, workers: [v1.workerId], updatedAt: expect.any(Number), unfinished: true },
        { version: 2, workers: [v2.workerId], updatedAt: expect.any(Number), unfinished: false },
      ],
      missing: [],
    });
    await v1.stop();
    checkout = (await get('/api/versions').expect(200)).body.workflows.find((w: { name: string }) => w.name === 'checkout');
    expect(checkout.missing).toEqual([1]);
    expect(checkout.versions[0]).toMatchObject({ version: 1, workers: [], unfinished: true });
  });

  it('GET /api/schedules: crons and runtime schedules with their next 5 ticks and last runs; POST /api/schedules/trigger starts one now', async () => {
    await engine.client.schedule('every-second', { workflow: 'parked', every: 1000, input: { tick: true } });
    await eventually(async () => (await engine.client.listRunSummaries({ workflow: 'parked' })).some((r) => r.id.startsWith('cron.@every-second.')), 5000);
    const { schedules } = (await get('/api/schedules').expect(200)).body;
    const yearly = schedules.find((s: { id: string }) => s.id === 'ok-yearly');
    expect(yearly).toMatchObject({ source: 'definition', workflow: 'ok', expression: '0 0 1 1 *', lastRuns: [] });
    expect(yearly).not.toHaveProperty('input');
    const first = nextCronTick('ok', { expression: '0 0 1 1 *' }, Date.now());
    expect(yearly.next).toEqual([first, ...[1, 2, 3, 4].map((n) => new Date(new Date(first).setFullYear(new Date(first).getFullYear() + n)).getTime())]);
    const every = schedules.find((s: { id: string }) => s.id === 'every-second');
    expect(every).toMatchObject({ source: 'runtime', workflow: 'parked', every: 1000 });
    expect(every.next).toHaveLength(5);
    expect(every.next[1] - every.next[0]).toBe(1000);
    expect(every.lastRuns.length).toBeGreaterThanOrEqual(1);
    expect(every.lastRuns[0].id).toMatch(/^cron\.@every-second\.\d+$/);
    await engine.client.unschedule('every-second');

    const page = await request(server).get('/redflow/').expect(200);
    const token = /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text)![1];
    const trigger = (query: string, headers: Record<string, string> = { ...SAME_ORIGIN_JSON, 'x-redflow-csrf': token }) =>
      request(server).post(`/redflow/api/schedules/trigger?${query}`).set(headers).send({});
    const started = await trigger('id=ok-yearly');
    expect(started.status).toBe(201);
    await expect(engine.client.getRun(started.body.runId)).resolves.toMatchObject({ workflow: 'ok', input: { secret: 'x' } });
    expect((await trigger('id=nope')).status).toBe(404);
    expect((await trigger('')).status).toBe(400);
    expect((await trigger('id=ok-yearly', SAME_ORIGIN_JSON)).status).toBe(403);

    // Pause with a note and resume; a paused schedule lists no next ticks.
    const action = (path: string, query: string) =>
      request(server)
        .post(`/redflow/api/schedules/${path}?${query}`)
        .set({ ...SAME_ORIGIN_JSON, 'x-redflow-csrf': token })
        .send({});
    const paused = await action('pause', 'id=ok-yearly&note=year-end%20freeze');
    expect(paused.status).toBe(200);
    expect(paused.body).toMatchObject({ id: 'ok-yearly', paused: { note: 'year-end freeze' } });
    const listed = (await get('/api/schedules').expect(200)).body.schedules.find((s: { id: string }) => s.id === 'ok-yearly');
    expect(listed).toMatchObject({ paused: { note: 'year-end freeze' }, next: [] });
    const resumed = await action('resume', 'id=ok-yearly');
    expect(resumed.body.paused).toBeUndefined();
    expect(resumed.body.nextAt).toBe(first);
    expect((await action('pause', 'id=nope')).status).toBe(404);
    expect((await request(server).post('/redflow/api/schedules/pause?id=ok-yearly').set(SAME_ORIGIN_JSON).send({})).status).toBe(403);
  });
});
