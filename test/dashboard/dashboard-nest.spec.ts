import 'reflect-metadata';

import { request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Catch,
  Controller,
  Get,
  HttpException,
  Injectable,
  type ArgumentsHost,
  type CallHandler,
  type CanActivate,
  type ExceptionFilter,
  type ExecutionContext,
  type INestApplication,
  type NestInterceptor,
} from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_INTERCEPTOR, HttpAdapterHost } from '@nestjs/core';
import { FastifyAdapter } from '@nestjs/platform-fastify';
import { Test } from '@nestjs/testing';
import request from 'supertest';

import { basicAuth, ConfigurationError, guard, RedflowModule, type DashboardOptions, type RedflowModuleOptions } from '../../lib';
import { TestEngine } from '../support/engine';
import { createNestApp, fastifyReady } from '../support/nest-app';
import { OwnRedis } from '../support/own-redis';

/**
 * The dashboard as Nest routes, on Express and on Fastify: the app's global prefix, middleware
 * and guards apply; path tricks never reach the API; actions are refused from other origins
 * whatever the CORS setup; startup refuses a dashboard nobody decided access for.
 */

type Platform = 'express' | 'fastify';
const JSON_HEADERS = { 'content-type': 'application/json', 'sec-fetch-site': 'same-origin' };

@Controller()
class HealthController {
  @Get('health')
  health() {
    return { ok: true };
  }
}

/** A typical auth middleware, mounted by path prefix as a reverse proxy rule would be. */
function requireUserOnDashboardPath(req: IncomingMessage & { originalUrl?: string }, res: ServerResponse, next: () => void): void {
  const url = req.originalUrl ?? req.url ?? '';
  if ((url.startsWith('/redflow') || url.startsWith('/api/redflow')) && req.headers['x-user'] !== 'admin') {
    res.statusCode = 401;
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ statusCode: 401, message: 'app middleware: sign in' }));
    return;
  }
  next();
}

async function startApp(
  platform: Platform,
  module: Partial<RedflowModuleOptions> & { dashboard?: DashboardOptions },
  setup: { prefix?: string; cors?: boolean; middleware?: boolean; providers?: unknown[] } = {},
): Promise<INestApplication> {
  const app = await createNestApp(
    {
      imports: [RedflowModule.forRoot({ app: 'dashboard-nest', worker: false, ...module } as RedflowModuleOptions)],
      controllers: [HealthController],
      providers: (setup.providers ?? []) as never[],
    },
    { adapter: platform === 'fastify' ? new FastifyAdapter() : undefined },
  );
  if (setup.prefix) app.setGlobalPrefix(setup.prefix);
  if (setup.cors) app.enableCors({ origin: true, credentials: true });
  if (setup.middleware) app.use(requireUserOnDashboardPath);
  await app.init();
  if (platform === 'fastify') await fastifyReady(app);
  return app;
}

/** A request sent with its path exactly as written: node:http does not normalize it (supertest turns "\\" into "/"). */
async function rawRequest(
  app: INestApplication,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const server = app.getHttpServer() as import('node:http').Server;
  if (!server.listening) await app.listen(0, '127.0.0.1');
  const { port } = server.address() as AddressInfo;
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path, method, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    })
      .on('error', reject)
      .end(method === 'POST' ? '{}' : undefined);
  });
}

/** The page's anti-CSRF token, as the page's script reads it. */
async function pageToken(app: INestApplication, path: string, headers: Record<string, string> = {}): Promise<string> {
  const page = await request(app.getHttpServer()).get(path).set(headers).expect(200);
  const match = /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text);
  if (!match) throw new Error(`No token in the page at ${path}`);
  return match[1];
}

describe.each<Platform>(['express', 'fastify'])('dashboard as Nest routes on %s', (platform) => {
  let engine: TestEngine;
  let app: INestApplication | undefined;
  let done: string;
  const base = () => ({ connection: engine.redis, prefix: engine.prefix });

  beforeAll(async () => {
    engine = new TestEngine();
    engine.registry.define('ok', {}, ({ input }) => input);
    engine.registry.define('idle', { queue: 'parked' }, () => 'never runs');
    await engine.worker({ queues: ['default'] });
    const handle = await engine.client.runByName('ok', { hello: 'nest', password: 'hunter2' });
    await handle.result({ timeoutMs: 5000 });
    done = handle.id;
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
  });
  afterAll(() => engine?.close());

  it('serves the page, assets and API below the global prefix, with the page based on its prefixed path', async () => {
    app = await startApp(platform, { ...base(), dashboard: { path: '/redflow', authorize: () => true } }, { prefix: 'api' });
    const http = () => request(app!.getHttpServer());
    const page = await http().get('/api/redflow').expect(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['content-security-policy']).toContain("default-src 'self'");
    expect(page.text).toContain('src="/api/redflow/app.js"');
    expect(page.text).toContain('data-base="/api/redflow"');
    // With a trailing slash too, where the framework routes it (Fastify does not, by default).
    await http()
      .get('/api/redflow/')
      .expect(platform === 'express' ? 200 : 404);
    await http().get('/api/redflow/app.js').expect(200).expect('content-type', 'text/javascript; charset=utf-8');
    expect((await http().get('/api/redflow/api/meta').expect(200)).body).toEqual({ readOnly: false, prefix: engine.prefix });
    const runs = (await http().get('/api/redflow/api/runs?workflow=ok').expect(200)).body as { runs: Array<Record<string, unknown>> };
    expect(runs.runs.map((r) => [r.id, r.status])).toEqual([[done, 'succeeded']]);
    expect(runs.runs[0]).not.toHaveProperty('input');
    const detail = (await http().get(`/api/redflow/api/run?id=${done}`).expect(200)).body;
    expect(detail.run).toMatchObject({ id: done, status: 'succeeded' });
    expect(JSON.parse(detail.run.input.text)).toEqual({ hello: 'nest', password: '***' });
    // Without the prefix, nothing.
    await http().get('/redflow/api/meta').expect(404);
    // The prefix in another case, which Express routes: 400 from the dashboard's guard, which wants
    // the raw path to be its route's exactly (Fastify has no such route). An escape anywhere in a
    // path naming the dashboard: 400 before routing.
    const caseTrick = await rawRequest(app, 'GET', '/API/redflow/api/meta');
    expect(caseTrick.status).toBe(platform === 'express' ? 400 : 404);
    if (platform === 'express') expect(JSON.parse(caseTrick.text)).toMatchObject({ statusCode: 400, code: 'BAD_PATH' });
    const escapeTrick = await rawRequest(app, 'GET', '/%61pi/redflow/api/meta');
    expect([escapeTrick.status, JSON.parse(escapeTrick.text).code]).toEqual([400, 'BAD_PATH']);
    // Path tricks get 400 before routing, inside the global prefix and outside it.
    for (const path of [
      '/api/x/../redflow/api/meta',
      '//api/redflow/api/meta',
      '/x/../api/redflow/api/meta',
      '/api/REDFLOW/api/meta',
      '/api/%72edflow/api/meta',
    ]) {
      const res = await rawRequest(app, 'GET', path);
      expect([path, res.status, JSON.parse(res.text).code]).toEqual([path, 400, 'BAD_PATH']);
    }
    expect((await http().get('/api/health').expect(200)).body).toEqual({ ok: true });
  });

  it('path tricks get 400 before routing, past or short of an auth middleware on the dashboard path; never the API', async () => {
    app = await startApp(platform, { ...base(), dashboard: { path: '/redflow', authorize: () => true } }, { middleware: true });
    const http = () => request(app!.getHttpServer());
    expect((await http().get('/redflow/api/runs').expect(401)).body).toEqual({ statusCode: 401, message: 'app middleware: sign in' });
    expect((await http().get('/redflow/api/runs').set('x-user', 'admin').expect(200)).body.runs).toHaveLength(1);
    const badPath = { statusCode: 400, code: 'BAD_PATH', message: expect.stringContaining('the dashboard answers plain paths only') };
    const tricks = [
      '//x/redflow/api/runs',
      '/x/%2e%2e/redflow/api/runs',
      '/health/../redflow/api/runs',
      '/x/..%2fredflow/api/runs',
      '/redflow/api/../api/runs',
      '/redflow//api/runs',
      '/redflow/api/%72uns',
      '/x\\..\\redflow/api/runs',
      // Express routes case-insensitively, Fastify decodes escapes: both reach the routes with a
      // prefix the app's middleware (and a proxy rule) does not see.
      '/REDFLOW/api/runs',
      '/Redflow/api/run?id=x',
      '/%72edflow/api/runs',
      '/%52EDFLOW/api/runs',
    ];
    for (const path of tricks) {
      // Signed in, past the app's middleware: the dashboard's own check answers.
      const admin = await rawRequest(app, 'GET', path, { 'x-user': 'admin' });
      expect([path, admin.status, JSON.parse(admin.text)]).toEqual([path, 400, badPath]);
      // Anonymous: the app's middleware answers for the paths it sees as its own, 400 for the rest.
      const anonymous = await rawRequest(app, 'GET', path);
      expect([path, anonymous.status]).toEqual([path, path.startsWith('/redflow') ? 401 : 400]);
      expect(anonymous.text).not.toContain(done);
    }
    // The cancel POST through a trick path changes nothing either.
    const queued = await engine.client.runByName('idle', { trick: true });
    for (const path of [
      `//x/redflow/api/run/cancel?id=${queued.id}`,
      `/health/../redflow/api/run/cancel?id=${queued.id}`,
      `/REDFLOW/api/run/cancel?id=${queued.id}`,
      `/%72edflow/api/run/cancel?id=${queued.id}`,
    ]) {
      const res = await rawRequest(app, 'POST', path, { ...JSON_HEADERS, 'x-user': 'admin' });
      expect([path, res.status]).toEqual([path, 400]);
    }
    expect((await engine.client.getRun(queued.id))!.status).toBe('queued');
    await engine.client.cancelRun(queued.id);
    // Other app routes, percent escapes included, are left alone.
    expect((await http().get('/health').expect(200)).body).toEqual({ ok: true });
    await http()
      .get('/%68ealth')
      .expect((res) => expect(res.status).not.toBe(400));
  });

  it('with permissive CORS, a cross-origin POST gets 403 and cancels nothing; the page itself can cancel', async () => {
    app = await startApp(platform, { ...base(), dashboard: { path: '/redflow', authorize: () => true } }, { cors: true });
    const http = () => request(app!.getHttpServer());
    const { id } = await engine.client.runByName('idle', { csrf: true });
    const token = await pageToken(app, '/redflow');
    const cancel = () => http().post(`/redflow/api/run/cancel?id=${id}`);

    // Another site's script: the browser marks it cross-site, whatever CORS allows.
    const crossSite = await cancel()
      .set({ 'content-type': 'application/json', 'sec-fetch-site': 'cross-site', origin: 'https://evil.example', 'x-redflow-csrf': token })
      .send({});
    expect(crossSite.status).toBe(403);
    expect(crossSite.body).toMatchObject({ statusCode: 403, code: 'CROSS_SITE' });
    // An older browser without Sec-Fetch-Site: the Origin is not the host.
    expect((await cancel().set({ 'content-type': 'application/json', origin: 'https://evil.example', 'x-redflow-csrf': token }).send({})).status).toBe(403);
    // No Origin and no Sec-Fetch-Site at all.
    expect((await cancel().set({ 'content-type': 'application/json', 'x-redflow-csrf': token }).send({})).status).toBe(403);
    // Same origin, but no token or a forged one.
    expect((await cancel().set(JSON_HEADERS).send({})).body).toMatchObject({ statusCode: 403, code: 'CSRF_TOKEN' });
    expect(
      (
        await cancel()
          .set({ ...JSON_HEADERS, 'x-redflow-csrf': `${token.slice(0, -4)}AAAA` })
          .send({})
      ).body,
    ).toMatchObject({ statusCode: 403, code: 'CSRF_TOKEN' });
    // A form post (what a plain HTML form can send) is not JSON.
    const form = await cancel().set({ 'sec-fetch-site': 'same-origin', 'x-redflow-csrf': token }).type('form').send('a=1');
    expect(form.status).toBe(415);
    // Cross-site reads of the API are refused too, though CORS would let the script read them.
    expect(
      (await http().get('/redflow/api/runs').set({ 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors', origin: 'https://evil.example' })).status,
    ).toBe(403);
    expect((await engine.client.getRun(id))!.status).toBe('queued');

    // The page's own request: same origin, JSON, its token.
    expect(
      (
        await cancel()
          .set({ ...JSON_HEADERS, 'x-redflow-csrf': token })
          .send({})
          .expect(200)
      ).body,
    ).toEqual({ canceled: true });
    expect((await engine.client.getRun(id))!.status).toBe('canceled');
    // Older browsers: an Origin equal to the Host.
    const other = await engine.client.runByName('idle', { csrf: 2 });
    const host = 'dashboard.internal:8080';
    await http()
      .post(`/redflow/api/run/cancel?id=${other.id}`)
      .set({ host, origin: `http://${host}`, 'content-type': 'application/json', 'x-redflow-csrf': token })
      .send({})
      .expect(200);
    expect((await engine.client.getRun(other.id))!.status).toBe('canceled');

    // Terminate and delete are Nest routes too, under the same checks.
    const doomed = await engine.client.runByName('idle', { csrf: 3 });
    expect((await http().post(`/redflow/api/run/terminate?id=${doomed.id}`).set(JSON_HEADERS).send({})).body).toMatchObject({
      statusCode: 403,
      code: 'CSRF_TOKEN',
    });
    expect((await http().post(`/redflow/api/run/delete?id=${doomed.id}&force=1`).set(JSON_HEADERS).send({})).body).toMatchObject({
      statusCode: 403,
      code: 'CSRF_TOKEN',
    });
    expect(
      (
        await http()
          .post(`/redflow/api/run/terminate?id=${doomed.id}`)
          .set({ ...JSON_HEADERS, 'x-redflow-csrf': token })
          .send({})
          .expect(200)
      ).body,
    ).toEqual({ terminated: true });
    expect((await engine.client.getRun(doomed.id))!.status).toBe('terminated');
    expect(
      (
        await http()
          .post(`/redflow/api/run/delete?id=${doomed.id}`)
          .set({ ...JSON_HEADERS, 'x-redflow-csrf': token })
          .send({})
          .expect(200)
      ).body,
    ).toEqual({ deleted: true });
    expect(await engine.client.getRun(doomed.id)).toBeNull();
  });

  it('refuses to start a dashboard without authorize, naming the option and showing examples', async () => {
    const error = await startApp(platform, { ...base(), dashboard: { path: '/redflow' } as DashboardOptions }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('RedflowModule option "dashboard" needs an "authorize" option');
    expect((error as Error).message).toContain('basicAuth({ username: "ops", password: process.env.DASHBOARD_PASSWORD })');
    expect((error as Error).message).toContain('authorize: () => true');
  });

  it('refuses to start a forRootAsync dashboard whose factory returns no authorize', async () => {
    const testing = Test.createTestingModule({
      imports: [
        RedflowModule.forRootAsync({
          dashboardPath: '/redflow',
          useFactory: () => ({ app: 'dashboard-nest', worker: false, ...base(), dashboard: {} as DashboardOptions }),
        }),
      ],
    });
    const error = await testing.compile().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('RedflowModule option "dashboard" (from the forRootAsync factory) needs an "authorize" option');
    expect((error as Error).message).toContain('authorize: () => true');
  });

  it("the app's global interceptor and exception filter apply to the dashboard's routes", async () => {
    @Injectable()
    class StampInterceptor implements NestInterceptor {
      constructor(private readonly adapterHost: HttpAdapterHost) {}
      intercept(context: ExecutionContext, next: CallHandler) {
        this.adapterHost.httpAdapter.setHeader(context.switchToHttp().getResponse(), 'x-app-interceptor', 'seen');
        return next.handle();
      }
    }
    @Catch(HttpException)
    class WrapFilter implements ExceptionFilter {
      constructor(private readonly adapterHost: HttpAdapterHost) {}
      catch(exception: HttpException, host: ArgumentsHost) {
        this.adapterHost.httpAdapter.reply(host.switchToHttp().getResponse(), { wrapped: exception.getResponse() }, exception.getStatus());
      }
    }
    app = await startApp(
      platform,
      { ...base(), dashboard: { path: '/redflow', authorize: () => true } },
      {
        providers: [
          { provide: APP_INTERCEPTOR, useClass: StampInterceptor },
          { provide: APP_FILTER, useClass: WrapFilter },
        ],
      },
    );
    const http = () => request(app!.getHttpServer());
    const meta = await http().get('/redflow/api/meta').expect(200);
    expect(meta.headers['x-app-interceptor']).toBe('seen');
    expect(meta.body).toEqual({ readOnly: false, prefix: engine.prefix });
    await http().get('/redflow').expect(200).expect('x-app-interceptor', 'seen');
    // The dashboard's refusals are HttpExceptions, so the app's filter shapes them.
    expect((await http().get('/redflow/api/run?id=nope').expect(404)).body).toEqual({
      wrapped: { statusCode: 404, code: 'RUN_NOT_FOUND', message: 'Run "nope" does not exist.' },
    });
    expect((await http().get('/redflow/api/runs?status=done').expect(400)).body).toEqual({
      wrapped: {
        statusCode: 400,
        code: 'BAD_REQUEST',
        message: 'Unknown status "done". Use one of scheduled, queued, running, compensating, succeeded, failed, canceled, compensation_failed, terminated.',
      },
    });
  });

  it('basicAuth: 401 with WWW-Authenticate so the browser prompts, 200 with the right user and password', async () => {
    app = await startApp(platform, { ...base(), dashboard: { path: '/ops', authorize: basicAuth({ username: 'ops', password: 's3cret' }) } });
    const http = () => request(app!.getHttpServer());
    const anonymous = await http().get('/ops').expect(401);
    expect(anonymous.headers['www-authenticate']).toBe('Basic realm="Redflow", charset="UTF-8"');
    expect(anonymous.body).toEqual({ statusCode: 401, code: 'UNAUTHORIZED', message: 'Sign in to use the dashboard.' });
    // Refusals carry the dashboard's security headers too.
    expect(anonymous.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(anonymous.headers['cache-control']).toBe('no-store');
    await http().get('/ops/api/meta').auth('ops', 'wrong').expect(401);
    await http().get('/ops/api/meta').auth('admin', 's3cret').expect(401);
    expect((await http().get('/ops/api/meta').auth('ops', 's3cret').expect(200)).body).toEqual({ readOnly: false, prefix: engine.prefix });
    await http().get('/ops').auth('ops', 's3cret').expect(200).expect('content-type', 'text/html; charset=utf-8');
  });

  it("guard(MyGuard): an app guard with its dependencies decides; the app's global guards apply too", async () => {
    @Injectable()
    class Users {
      isAdmin = (name: unknown) => name === 'admin';
    }
    @Injectable()
    class AdminGuard implements CanActivate {
      constructor(private readonly users: Users) {}
      canActivate(context: ExecutionContext): boolean {
        return this.users.isAdmin(context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['x-user']);
      }
    }
    @Injectable()
    class NoBots implements CanActivate {
      canActivate(context: ExecutionContext): boolean {
        return context.switchToHttp().getRequest<{ headers: Record<string, string> }>().headers['user-agent'] !== 'bot';
      }
    }
    app = await startApp(
      platform,
      { ...base(), dashboard: { path: '/redflow', authorize: guard(AdminGuard) } },
      { providers: [Users, AdminGuard, { provide: APP_GUARD, useClass: NoBots }] },
    );
    const http = () => request(app!.getHttpServer());
    expect((await http().get('/redflow/api/meta').set('x-user', 'guest').expect(403)).body).toMatchObject({ statusCode: 403, code: 'FORBIDDEN' });
    await http().get('/redflow/api/meta').set('x-user', 'admin').expect(200);
    await http().get('/redflow/api/meta').set({ 'x-user': 'admin', 'user-agent': 'bot' }).expect(403);
    await http().get('/health').set('user-agent', 'bot').expect(403);
  });

  it('downloads a whole payload, re-runs and resumes through the Nest routes; a corrupt run is a row marked corrupt', async () => {
    app = await startApp(platform, { ...base(), dashboard: { path: '/redflow', authorize: () => true } });
    const http = () => request(app!.getHttpServer());
    const download = await http().get(`/redflow/api/run/payload?id=${done}&field=input`).expect(200);
    expect(download.headers['content-disposition']).toBe(`attachment; filename="${done}-input.json"`);
    expect(download.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(JSON.parse(download.text)).toEqual({ hello: 'nest', password: '***' });

    const token = await pageToken(app, '/redflow');
    const act = (action: string, id: string) =>
      http()
        .post(`/redflow/api/run/${action}?id=${id}`)
        .set({ ...JSON_HEADERS, 'x-redflow-csrf': token })
        .send({});
    const parked = await engine.client.runByName('idle', { act: platform });
    await engine.client.cancelRun(parked.id);
    const rerun = (await act('rerun', parked.id).expect(201)).body as { runId: string };
    expect(await engine.client.getRun(rerun.runId)).toMatchObject({ workflow: 'idle', status: 'queued', input: { act: platform } });
    expect((await act('resume', parked.id).expect(200)).body).toEqual({ runId: parked.id });
    expect((await engine.client.getRun(parked.id))!.status).toBe('queued');
    expect((await act('resume', parked.id).expect(409)).body).toMatchObject({ statusCode: 409, code: 'NOT_ENDED_BADLY' });

    await engine.redis.hset(engine.client.keys.run(rerun.runId), 'attempt', 'two');
    const rows = (await http().get('/redflow/api/runs?workflow=idle&status=queued').expect(200)).body.runs as Array<{ id: string; corrupt?: string }>;
    expect(rows.find((row) => row.id === rerun.runId)).toMatchObject({ id: rerun.runId, corrupt: 'field "attempt" is not a number' });
    expect(rows.find((row) => row.id === parked.id)).toMatchObject({ id: parked.id, status: 'queued' });
    expect((await http().get(`/redflow/api/run?id=${rerun.runId}`).expect(422)).body).toMatchObject({ statusCode: 422, code: 'CORRUPT_RUN' });
    await engine.redis.hset(engine.client.keys.run(rerun.runId), 'attempt', '0');
    for (const id of [parked.id, rerun.runId]) await engine.client.cancelRun(id);
  });

  it('serves the run filters, ids, history, bulk actions, signals, queues, workers, versions and schedules through the Nest routes', async () => {
    app = await startApp(platform, { ...base(), dashboard: { path: '/redflow', authorize: () => true } });
    const http = () => request(app!.getHttpServer());
    const page = (await http().get('/redflow/api/runs?workflow=ok&order=oldest&limit=1').expect(200)).body;
    expect(page).toMatchObject({ runs: [{ id: done }], nextCursor: null, totals: { succeeded: 1 } });
    expect((await http().get('/redflow/api/runs?workflow=ok&cursor=junk').expect(400)).body.code).toBe('BAD_REQUEST');
    expect((await http().get('/redflow/api/runs/ids?workflow=ok').expect(200)).body).toEqual({ ids: [done], nextCursor: null, total: 1, totalExact: true });
    const history = (await http().get(`/redflow/api/run/history?id=${done}`).expect(200)).body;
    expect(history.events.map((e: { type: string }) => e.type)).toEqual(['run.created', 'run.started', 'run.completed']);
    expect((await http().get('/redflow/api/queues').expect(200)).body.queues).toEqual(
      expect.arrayContaining([expect.objectContaining({ queue: 'parked', paused: false })]),
    );
    expect((await http().get('/redflow/api/workers').expect(200)).body.workers.length).toBeGreaterThanOrEqual(1);
    expect((await http().get('/redflow/api/versions').expect(200)).body.workflows).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'ok', missing: [] })]),
    );
    expect((await http().get('/redflow/api/schedules').expect(200)).body).toEqual({ schedules: [] });

    const token = await pageToken(app, '/redflow');
    const post = (path: string, headers: Record<string, string> = { ...JSON_HEADERS, 'x-redflow-csrf': token }) =>
      http().post(`/redflow${path}`).set(headers).send({});
    const parked = await engine.client.runByName('idle', { bulk: platform });
    expect((await post(`/api/runs/bulk?action=cancel&ids=${parked.id},${done}`).expect(200)).body).toEqual({
      action: 'cancel',
      done: [parked.id],
      skipped: [{ id: done, reason: 'it is succeeded: only queued, scheduled or running runs can be canceled' }],
    });
    await post(`/api/runs/bulk?action=cancel&ids=${parked.id}`, JSON_HEADERS).expect(403);
    expect((await post(`/api/run/signal?id=${done}&name=go&payload=%7B%7D`).expect(200)).body).toEqual({ sent: false });
    expect((await post(`/api/run/signal?id=${done}&name=go&payload=nope`).expect(400)).body.code).toBe('BAD_REQUEST');
    expect((await post('/api/schedules/trigger?id=nope').expect(404)).body.code).toBe('NOT_FOUND');
    await engine.client.deleteRun(parked.id);
  });

  it('errors carry a code and a sentence; internal details go to the log only', async () => {
    app = await startApp(platform, {
      ...base(),
      dashboard: {
        path: '/redflow',
        authorize: () => true,
        redact: () => {
          throw new Error('internal: /srv/app/secret-config.ts line 12');
        },
      },
    });
    const http = () => request(app!.getHttpServer());
    const failed = await http().get(`/redflow/api/run?id=${done}`).expect(500);
    expect(failed.body).toEqual({ statusCode: 500, code: 'INTERNAL', message: 'The dashboard failed to answer; the server log has the details.' });
    expect(failed.text).not.toContain('secret-config');
    expect((await http().get('/redflow/api/run?id=nope').expect(404)).body).toEqual({
      statusCode: 404,
      code: 'RUN_NOT_FOUND',
      message: 'Run "nope" does not exist.',
    });
    expect((await http().get('/redflow/api/runs?status=done').expect(400)).body).toMatchObject({ statusCode: 400, code: 'BAD_REQUEST' });
  });
});

describe.each<Platform>(['express', 'fastify'])('dashboard on %s while Redis is unreachable', (platform) => {
  let server: OwnRedis;
  let app: INestApplication | undefined;

  beforeAll(async () => {
    server = await OwnRedis.start();
  });
  afterAll(async () => {
    server.resume();
    await app?.close();
    await server.stop();
  });

  it('answers 503 REDIS_UNAVAILABLE within seconds while Redis is paused, still serves the page, and data again when it is back', async () => {
    app = await startApp(platform, {
      connection: server.url,
      prefix: `outage-${platform}`,
      commandTimeoutMs: 20_000,
      dashboard: { path: '/redflow', authorize: () => true },
    });
    const http = () => request(app!.getHttpServer());
    await http().get('/redflow/api/overview').expect(200);
    server.pause();
    const started = Date.now();
    const res = await http().get('/redflow/api/overview');
    expect(res.status).toBe(503);
    expect(res.body).toEqual({
      statusCode: 503,
      code: 'REDIS_UNAVAILABLE',
      message: `Redis at 127.0.0.1:${server.port} is unreachable; the dashboard shows data again when it is back.`,
    });
    expect(Date.now() - started).toBeLessThan(10_000);
    // The page still loads, so its script can show the notice; its token is signed with a
    // secret of this process, which it accepts once Redis is back.
    const page = await http().get('/redflow').expect(200).expect('content-type', 'text/html; charset=utf-8');
    const token = /<meta name="redflow-csrf" content="([^"]+)">/.exec(page.text)![1];
    server.resume();
    await http().get('/redflow/api/overview').expect(200);
    // Accepted: the action goes on to look the run up (404), rather than a 403 CSRF_TOKEN.
    const cancel = await http()
      .post('/redflow/api/run/cancel?id=nope')
      .set({ ...JSON_HEADERS, 'x-redflow-csrf': token })
      .send({});
    expect(cancel.body).toEqual({ statusCode: 404, code: 'RUN_NOT_FOUND', message: 'Run "nope" does not exist.' });
  });
});
