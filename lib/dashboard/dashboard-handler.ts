import type { IncomingMessage, ServerResponse } from 'node:http';

import type { WorkflowClient } from '../core/client/workflow-client';
import type { RedflowLogger } from '../core/definition/logger';
import { ConfigurationError } from '../core/errors';
import { DashboardApi, SECURITY_HEADERS } from './dashboard-api';
import { DashboardHttpError, echo } from './dashboard-http-error';
import { resolveDashboardOptions, type DashboardDenial, type DashboardOptions } from './dashboard-options';
import { checkNotCrossSiteRead, checkRawPath } from './request-checks';

type Route = (api: DashboardApi, query: URLSearchParams, req: IncomingMessage, base: string) => Promise<Reply> | Reply;
type Reply = { body: string; type: string; headers?: Record<string, string>; status?: number } | { json: unknown; status?: number };

/** The routes below the dashboard's path, matched on the exact raw path: no normalization at all. */
const ROUTES: Record<string, Partial<Record<'GET' | 'POST', Route>>> = {
  '': { GET: (api, _q, _r, base) => api.page(base) },
  '/': { GET: (api, _q, _r, base) => api.page(base) },
  '/app.js': { GET: (api) => api.file('app.js') },
  '/app.css': { GET: (api) => api.file('app.css') },
  '/api/meta': { GET: (api) => ({ json: api.meta() }) },
  '/api/overview': { GET: async (api) => ({ json: await api.overview() }) },
  '/api/workflows': { GET: async (api) => ({ json: await api.workflows() }) },
  '/api/queues': { GET: async (api) => ({ json: await api.queues() }) },
  '/api/workers': { GET: async (api) => ({ json: await api.workers() }) },
  '/api/versions': { GET: async (api) => ({ json: await api.versions() }) },
  '/api/schedules': { GET: async (api) => ({ json: await api.schedules() }) },
  '/api/schedules/trigger': { POST: async (api, query, req) => ({ json: await api.trigger(query, req.headers), status: 201 }) },
  '/api/schedules/pause': { POST: async (api, query, req) => ({ json: await api.pauseSchedule(query, req.headers) }) },
  '/api/schedules/resume': { POST: async (api, query, req) => ({ json: await api.resumeSchedule(query, req.headers) }) },
  '/api/queues/pause': { POST: async (api, query, req) => ({ json: await api.pauseQueue(query, req.headers, true) }) },
  '/api/queues/resume': { POST: async (api, query, req) => ({ json: await api.pauseQueue(query, req.headers, false) }) },
  '/api/runs': { GET: async (api, query) => ({ json: await api.runs(query) }) },
  '/api/runs/ids': { GET: async (api, query) => ({ json: await api.runIds(query) }) },
  '/api/runs/bulk': { POST: async (api, query, req) => ({ json: await api.bulk(query, req.headers) }) },
  '/api/run': { GET: async (api, query) => ({ json: await api.run(query) }) },
  '/api/run/history': { GET: async (api, query) => ({ json: await api.history(query) }) },
  '/api/run/signal': { POST: async (api, query, req) => ({ json: await api.signal(query, req.headers) }) },
  '/api/run/payload': {
    GET: async (api, query) => {
      const { body, filename } = await api.payload(query);
      return { body, type: 'application/json; charset=utf-8', headers: { 'content-disposition': `attachment; filename="${filename}"` } };
    },
  },
  '/api/run/cancel': { POST: async (api, query, req) => ({ json: await api.cancel(query, req.headers) }) },
  '/api/run/rerun': { POST: async (api, query, req) => ({ json: await api.rerun(query, req.headers), status: 201 }) },
  '/api/run/resume': { POST: async (api, query, req) => ({ json: await api.resume(query, req.headers) }) },
  '/api/run/terminate': { POST: async (api, query, req) => ({ json: await api.terminate(query, req.headers) }) },
  '/api/run/delete': { POST: async (api, query, req) => ({ json: await api.deleteRun(query, req.headers) }) },
};

function send(res: ServerResponse, status: number, body: string, type: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { ...SECURITY_HEADERS, ...headers, 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

/**
 * The dashboard as a plain Node request handler, for `node:http` servers and the CLI: the page,
 * its assets and the JSON API. It routes on the raw request path exactly as sent, and returns
 * false for paths outside its own, so it can sit in front of other handlers. In a Nest app, use
 * `RedflowModule.forRoot({ dashboard })` instead: it serves the same API as Nest routes.
 */
export function createDashboardHandler(client: WorkflowClient, options: DashboardOptions, logger: RedflowLogger = client.logger) {
  const resolved = resolveDashboardOptions(options, 'createDashboardHandler');
  const { authorize } = resolved;
  if (typeof authorize !== 'function') {
    throw new ConfigurationError(
      'guard() authorizers work in a Nest app only; give createDashboardHandler a function (request) => boolean, such as basicAuth({ username, password }).',
    );
  }
  const api = new DashboardApi(client, resolved, logger);
  const base = resolved.path;

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const raw = req.url ?? '/';
    const [path, search = ''] = raw.split(/\?(.*)/s);
    if (base !== '' && path !== base && !path.startsWith(`${base}/`)) {
      // Not ours, unless it is our path with a trick in it: refuse that rather than let another handler guess.
      if (!path.includes(base)) return false;
      try {
        checkRawPath(raw);
      } catch (error) {
        const refusal = error as DashboardHttpError;
        send(res, refusal.status, JSON.stringify(refusal.body), 'application/json; charset=utf-8');
        return true;
      }
      return false;
    }
    try {
      checkRawPath(raw);
      const route = ROUTES[path.slice(base.length)];
      const method = req.method === 'HEAD' ? 'GET' : req.method;
      const handler = route?.[method as 'GET' | 'POST'];
      if (!handler) throw new DashboardHttpError(route ? 405 : 404, route ? 'METHOD_NOT_ALLOWED' : 'NOT_FOUND', `Nothing at ${req.method} ${echo(path)}.`);
      const verdict = await authorize(req);
      if (verdict !== true) throw denied(verdict);
      if (path.startsWith(`${base}/api/`)) checkNotCrossSiteRead(req.headers);
      const reply = await handler(api, new URLSearchParams(search), req, base);
      if ('json' in reply) send(res, reply.status ?? 200, JSON.stringify(reply.json), 'application/json; charset=utf-8');
      else send(res, reply.status ?? 200, reply.body, reply.type, reply.headers);
    } catch (error) {
      const refusal = api.toHttpError(error);
      send(res, refusal.status, JSON.stringify(refusal.body), 'application/json; charset=utf-8', refusal.headers);
    }
    return true;
  };
}

/** The refusal for an `authorize` answer other than true. */
export function denied(verdict: boolean | DashboardDenial): DashboardHttpError {
  if (verdict && typeof verdict === 'object') {
    return new DashboardHttpError(
      verdict.status,
      verdict.status === 401 ? 'UNAUTHORIZED' : 'FORBIDDEN',
      verdict.message ?? 'Access to the dashboard was denied.',
      verdict.headers,
    );
  }
  return new DashboardHttpError(403, 'FORBIDDEN', 'Access to the dashboard was denied by its authorize function.');
}

export type DashboardHandler = ReturnType<typeof createDashboardHandler>;
