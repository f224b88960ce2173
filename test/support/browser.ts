// What the browser tests share: Debian's chromium, started and driven over CDP, and a node:http
// server around a dashboard handler that records every request.
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { delimiter, join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';

import { eventually } from './engine';

/** Debian's chromium (`apt-get install -y chromium`); Playwright never downloads a browser here. */
export function findChromium(): string | undefined {
  if (existsSync('/usr/bin/chromium')) return '/usr/bin/chromium';
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'chromium'))) return join(dir, 'chromium');
  }
  return undefined;
}

export const CHROMIUM = findChromium();
if (!CHROMIUM) {
  console.warn('Skipping the dashboard browser test: chromium is missing. Install it with `apt-get install -y chromium` (Debian).');
}
export const describeBrowser = CHROMIUM ? describe : describe.skip;

export const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** One request that reached a test server's dashboard API. */
export interface ApiHit {
  /** When it arrived (ms). */
  at: number;
  method: string;
  /** The path below the dashboard, e.g. `/api/run`. */
  route: string;
  query: URLSearchParams;
  authorization?: string;
  /** The status it was answered with, once answered. */
  status?: number;
}

/** A node:http server around a dashboard handler that records every request and can fake an outage. */
export interface TestServer {
  origin: string;
  /** Requests to `/redflow/api/...`, in arrival order. */
  hits: ApiHit[];
  /** Every request (page, assets, API) with the status it got, in arrival order. */
  requests: { path: string; authorization?: string; status?: number }[];
  /** While set, every API request is answered with this instead of reaching the dashboard. */
  outage?: { status: number; body: { statusCode: number; code: string; message: string } };
  close(): Promise<void>;
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => Promise<boolean>;

export async function serve(handler: Handler): Promise<TestServer> {
  const state: Omit<TestServer, 'origin' | 'close'> = { hits: [], requests: [] };
  const server: Server = createServer((req, res) => {
    const [path, search = ''] = (req.url ?? '/').split(/\?(.*)/s);
    const request: TestServer['requests'][number] = { path, authorization: req.headers.authorization };
    state.requests.push(request);
    res.on('finish', () => (request.status = res.statusCode));
    if (path.startsWith('/redflow/api/')) {
      const hit: ApiHit = {
        at: Date.now(),
        method: req.method ?? '',
        route: path.slice('/redflow'.length),
        query: new URLSearchParams(search),
        authorization: req.headers.authorization,
      };
      state.hits.push(hit);
      res.on('finish', () => (hit.status = res.statusCode));
      if (state.outage) {
        res.writeHead(state.outage.status, { 'content-type': 'application/json; charset=utf-8', 'retry-after': '2' }).end(JSON.stringify(state.outage.body));
        return;
      }
    }
    handler(req, res).then(
      (handled) => {
        if (!handled) res.writeHead(404).end('not the dashboard');
      },
      (error: unknown) => res.writeHead(500).end(String(error)),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(state, {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  });
}

/**
 * Chromium started here and driven over CDP. Playwright's own launch turns on focus emulation
 * for every page, which keeps each page "visible" for good (it holds the tab as if it were being
 * captured), so a background tab would never be hidden. Connecting with `noDefaults` (an option
 * Playwright passes through but does not type) leaves the pages of the browser's default context
 * alone: bringing another tab of that context to the front really hides the first one, as in a
 * desktop browser. The other tests use contexts of their own, which get Playwright's usual setup.
 */
export async function startChromium(executablePath: string, userDataDir: string): Promise<{ browser: Browser; process: ChildProcess }> {
  const child = spawn(executablePath, [...FLAGS, `--user-data-dir=${userDataDir}`, '--remote-debugging-port=0', 'about:blank'], {
    stdio: 'ignore',
    detached: true,
  }); // its own process group: stopped whole in afterAll
  try {
    const portFile = join(userDataDir, 'DevToolsActivePort');
    // "<port>\n/devtools/browser/<id>", once chromium listens.
    const port = await eventually(() => (existsSync(portFile) ? /^(\d+)\n\/devtools\/browser\//.exec(readFileSync(portFile, 'utf8'))?.[1] : undefined), 10_000);
    const options = { noDefaults: true, timeout: 10_000 };
    return { browser: await chromium.connectOverCDP(`http://127.0.0.1:${port}`, options), process: child };
  } catch (error) {
    process.kill(-child.pid!, 'SIGKILL');
    throw error;
  }
}
