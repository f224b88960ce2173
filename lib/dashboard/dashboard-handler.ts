import { readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { join } from 'node:path';
import { RUN_STATUSES, type RunStatus } from '../core/types';
import type { WorkflowClient } from '../core';

/** Options of the dashboard, in a Nest app or standalone. */
export interface DashboardOptions {
  /** Where the dashboard is mounted. @default "/redflow" */
  path?: string;
  /**
   * Decides whether a request may see the dashboard. Required: access is denied unless it returns
   * true. For open access pass `() => true` explicitly.
   */
  authorize: (request: IncomingMessage) => boolean | Promise<boolean>;
  /** Refuse cancel and re-run. @default false */
  readOnly?: boolean;
}

const ASSETS: Record<string, string> = {
  '/': 'index.html',
  '/app.js': 'app.js',
  '/app.css': 'app.css',
};
const TYPES: Record<string, string> = { html: 'text/html; charset=utf-8', js: 'text/javascript; charset=utf-8', css: 'text/css; charset=utf-8' };
// Everything the page loads comes from this package: no CDN, no inline script.
const SECURITY_HEADERS = {
  'content-security-policy': "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

function send(res: ServerResponse, status: number, body: string, type: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, 'content-type': type, 'content-length': Buffer.byteLength(body) });
  res.end(body);
}

function json(res: ServerResponse, status: number, body: unknown): void {
  send(res, status, JSON.stringify(body), 'application/json; charset=utf-8');
}

function int(value: string | null, fallback: number, max: number): number {
  const n = value === null || value === '' ? fallback : Number(value);
  if (!Number.isInteger(n) || n < 0) throw new HttpError(400, `Expected a whole number >= 0, got "${value}".`);
  return Math.min(n, max);
}

/**
 * The dashboard as a plain Node request handler: the page, its assets and a JSON API, all built
 * on the public client API. Returns false for requests outside its path, so it can sit in front
 * of other handlers.
 */
export function createDashboardHandler(client: WorkflowClient, options: DashboardOptions) {
  const base = `/${(options.path ?? '/redflow').replace(/^\/+|\/+$/g, '')}`.replace(/^\/$/, '');
  const assetDir = join(__dirname, 'assets');
  const assets = new Map<string, string>();
  const asset = (file: string) => {
    let text = assets.get(file);
    if (text === undefined) {
      text = readFileSync(join(assetDir, file), 'utf8').replace(/__BASE__/g, base);
      assets.set(file, text);
    }
    return text;
  };

  async function route(req: IncomingMessage, res: ServerResponse, path: string, query: URLSearchParams): Promise<void> {
    const method = req.method ?? 'GET';
    const file = ASSETS[path];
    if (file && method === 'GET') return send(res, 200, asset(file), TYPES[file.split('.').pop()!]);
    if (path === '/api/meta' && method === 'GET') return json(res, 200, { readOnly: Boolean(options.readOnly), prefix: client.keys.prefix });
    if (path === '/api/overview' && method === 'GET') return json(res, 200, await client.getStats());
    if (path === '/api/workflows' && method === 'GET') {
      const [workflows, crons] = await Promise.all([client.listWorkflows(), client.listCrons()]);
      return json(res, 200, { workflows: workflows.map((w) => ({ ...w, maxConcurrency: w.maxConcurrency === Infinity ? null : w.maxConcurrency })), crons });
    }
    if (path === '/api/runs' && method === 'GET') {
      const status = query.get('status') || undefined;
      if (status && !RUN_STATUSES.includes(status as RunStatus)) throw new HttpError(400, `Unknown status "${status}". Use one of ${RUN_STATUSES.join(', ')}.`);
      const limit = int(query.get('limit'), 25, 200);
      const offset = int(query.get('offset'), 0, 1_000_000);
      const runs = await client.listRuns({ workflow: query.get('workflow') || undefined, status: status as RunStatus | undefined, limit: limit + 1, offset });
      return json(res, 200, { runs: runs.slice(0, limit), offset, limit, hasMore: runs.length > limit });
    }
    const match = /^\/api\/runs\/([^/]+)(\/cancel|\/rerun)?$/.exec(path);
    if (match) {
      let id: string;
      try {
        id = decodeURIComponent(match[1]);
      } catch {
        throw new HttpError(400, 'The run id in the URL is not valid percent-encoding.');
      }
      if (!match[2] && method === 'GET') {
        const run = await client.getRun(id);
        if (!run) throw new HttpError(404, `Run "${id}" does not exist.`);
        const [steps, children] = await Promise.all([client.getRunSteps(id), client.getRunChildren(id)]);
        return json(res, 200, { run, steps, children });
      }
      if (match[2] && method === 'POST') return action(req, res, id, match[2] === '/cancel' ? 'cancel' : 'rerun');
    }
    throw new HttpError(404, `Nothing at ${method} ${base}${path}.`);
  }

  async function action(req: IncomingMessage, res: ServerResponse, id: string, kind: 'cancel' | 'rerun'): Promise<void> {
    if (options.readOnly) throw new HttpError(403, 'The dashboard is read-only: actions are disabled.');
    // A custom header cannot be sent by a cross-site form or image: it guards against CSRF.
    if (req.headers['x-redflow-action'] !== '1') throw new HttpError(400, 'Actions need the header "x-redflow-action: 1".');
    const run = await client.getRun(id);
    if (!run) throw new HttpError(404, `Run "${id}" does not exist.`);
    if (kind === 'cancel') return json(res, 200, { canceled: await client.cancelRun(id, { reason: 'canceled from the dashboard' }) });
    if (run.status !== 'failed' && run.status !== 'canceled') throw new HttpError(409, `Run "${id}" is ${run.status}: only failed or canceled runs can be re-run.`);
    const handle = await client.rerun(id);
    return json(res, 201, { runId: handle.id });
  }

  return async function handle(req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const url = new URL((req as IncomingMessage & { originalUrl?: string }).originalUrl ?? req.url ?? '/', 'http://dashboard');
    if (url.pathname !== base && !url.pathname.startsWith(`${base}/`)) return false;
    if (url.pathname === base) {
      res.writeHead(302, { location: `${base}/` });
      res.end();
      return true;
    }
    try {
      const allowed = await options.authorize(req);
      if (!allowed) throw new HttpError(403, 'Access to the dashboard was denied by its authorize function.');
      await route(req, res, url.pathname.slice(base.length) || '/', url.searchParams);
    } catch (error) {
      const status = error instanceof HttpError ? error.status : 500;
      const message = error instanceof Error ? error.message : String(error);
      json(res, status, { statusCode: status, message });
    }
    return true;
  };
}

export type DashboardHandler = ReturnType<typeof createDashboardHandler>;
