import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIPv4, isIPv6 } from 'node:net';

import type { DashboardHandler } from './dashboard-handler';

/**
 * The gate of the standalone dashboard (`redflow dashboard`), where no app stands in front of the
 * handler: the Host allow-list that stops DNS rebinding, then the token, sent as a bearer header
 * or carried by the session cookie of a one-time login link.
 */

/** The shortest token the standalone dashboard accepts. */
export const MIN_DASHBOARD_TOKEN_LENGTH = 16;

const SESSION_COOKIE = 'redflow_session';

/** A Host the dashboard answers to besides its own address; `port` undefined means the dashboard's own port. */
export interface AllowedHost {
  host: string;
  port?: number;
}

/** True for 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost. Other names may resolve anywhere. */
export function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const ipv4 = /^::ffff:(.+)$/.exec(h)?.[1] ?? h;
  return isIPv4(ipv4) && ipv4.startsWith('127.');
}

/** True for the addresses that listen on every interface. */
export const isWildcard = (host: string): boolean => host === '0.0.0.0' || host === '::';

/** A host as it appears in a URL or a Host header: lower case, IPv6 in brackets. */
export const urlHost = (host: string): string => (isIPv6(host) ? `[${host.toLowerCase()}]` : host.toLowerCase());

/** `host[:port]` of a Host header or an allowed host: a name, an IPv4 or a bracketed IPv6. */
const HOST_AND_PORT = /^(\[[0-9a-f:.]+\]|[^\s:[\]/@?#]+)(?::(\d{1,5}))?$/i;

/** The `host:port` a Host header names (port 80 when it has none), or undefined when malformed. */
function hostHeaderKey(header: string | undefined): string | undefined {
  const match = HOST_AND_PORT.exec(header?.trim() ?? '');
  if (!match) return undefined;
  return `${match[1].toLowerCase()}:${match[2] === undefined ? 80 : Number(match[2])}`;
}

/** `host[:port]` (IPv6 in brackets) as an allowed host, or undefined when it is not one. */
export function parseAllowedHost(value: string): AllowedHost | undefined {
  const match = HOST_AND_PORT.exec(value.trim());
  const port = match?.[2] === undefined ? undefined : Number(match[2]);
  if (!match || (port !== undefined && port > 65_535)) return undefined;
  return { host: match[1].toLowerCase(), port };
}

/**
 * The `host:port` keys the dashboard answers to, the first one being the one it prints: its own
 * address (on a loopback address also localhost, 127.0.0.1 and [::1]) and each allowed host.
 *
 * @param host the address it listens on, IPv6 without brackets
 * @param port the port it listens on
 */
export function acceptedHosts(host: string, port: number, allowedHosts: AllowedHost[]): string[] {
  const extra = allowedHosts.map((a) => `${a.host}:${a.port ?? port}`);
  const own = [`${urlHost(host)}:${port}`];
  if (isLoopback(host)) own.push(`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`);
  // An address that listens on every interface is no name a browser uses: print the first
  // allowed host instead when there is one.
  const all = isWildcard(host) && extra.length ? [...extra, ...own] : [...own, ...extra];
  return [...new Set(all)];
}

/** SHA-256 digests have equal lengths, so timingSafeEqual applies and no length leaks. */
function sameSecret(given: string, expected: string): boolean {
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(given), digest(expected));
}

function readCookie(req: IncomingMessage, name: string): string | undefined {
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/**
 * The token check of one dashboard process. A request passes with `Authorization: Bearer
 * <token>` or with the cookie of a session opened by a one-time login link; login links are
 * printed instead of the token so it never sits in a terminal's scrollback or a browser's
 * history. Sessions last as long as the process.
 */
export class TokenGate {
  private readonly loginCodes = new Set<string>();
  private readonly sessions = new Set<string>();

  constructor(private readonly token: string) {}

  /** A new login code, good for one sign-in. */
  newLoginCode(): string {
    const code = randomBytes(32).toString('hex');
    this.loginCodes.add(code);
    return code;
  }

  /** True when the request carries the token or the cookie of an open session. */
  admits(req: IncomingMessage): boolean {
    const bearer = /^Bearer +(\S+) *$/i.exec(req.headers.authorization ?? '')?.[1];
    if (bearer !== undefined && sameSecret(bearer, this.token)) return true;
    const session = readCookie(req, SESSION_COOKIE);
    return session !== undefined && [...this.sessions].some((s) => sameSecret(session, s));
  }

  /** Uses up a login code: the id of a new session, or undefined when the code is unknown or used. */
  openSession(code: string): string | undefined {
    const known = [...this.loginCodes].find((c) => sameSecret(code, c));
    if (known === undefined) return undefined;
    this.loginCodes.delete(known);
    const session = randomBytes(32).toString('hex');
    this.sessions.add(session);
    return session;
  }
}

function sendJson(res: ServerResponse, statusCode: number, code: string, message: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({ statusCode, code, message });
  res.writeHead(statusCode, {
    ...headers,
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
    'cache-control': 'no-store',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}

const TOKEN_REQUIRED =
  'This dashboard requires a token: open the one-time login link that "redflow dashboard" printed when it started, ' +
  'or send the header "Authorization: Bearer <token>".';
const LOGIN_LINK_USED =
  'This login link was used already or is not valid: each link works once. Restart "redflow dashboard" for a new one, ' +
  'or send the header "Authorization: Bearer <token>".';

/**
 * Answers a GET of `/?login=<code>`: a valid unused code opens a session (a cookie the page's own
 * requests carry) and redirects to `/`, so the code leaves the address bar.
 */
function login(gate: TokenGate, req: IncomingMessage, res: ServerResponse, code: string): void {
  const back = { location: '/', 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' };
  if (gate.admits(req)) {
    res.writeHead(302, back).end(); // signed in already: keep the code for whoever it was meant for
    return;
  }
  const session = gate.openSession(code);
  if (session === undefined) return sendJson(res, 401, 'TOKEN_REQUIRED', LOGIN_LINK_USED, { 'www-authenticate': 'Bearer realm="redflow"' });
  res.writeHead(302, { ...back, 'set-cookie': `${SESSION_COOKIE}=${session}; HttpOnly; SameSite=Strict; Path=/` }).end();
}

/**
 * The request listener around a dashboard handler served at `/`: the Host check (421 for any
 * Host not in `hosts`), then the token check when there is a gate, then the dashboard. Both
 * checks answer before the dashboard (and its authorize) sees the request.
 *
 * @param hosts the `host:port` keys it answers to (see `acceptedHosts`), the first one quoted in refusals
 * @param reportFailure told of an error the handler threw instead of answering; the request gets a 500
 */
export function gatedListener(
  handle: DashboardHandler,
  hosts: string[],
  gate: TokenGate | undefined,
  reportFailure: (req: IncomingMessage, error: Error) => void,
): (req: IncomingMessage, res: ServerResponse) => void {
  const accepted = new Set(hosts);
  const misdirected = `This dashboard answers to Host "${hosts[0]}" only; start it with --allowed-host <name> to allow another.`;
  return (req, res) => {
    const host = hostHeaderKey(req.headers.host);
    if (host === undefined || !accepted.has(host)) return sendJson(res, 421, 'MISDIRECTED', misdirected);
    if (gate) {
      const url = new URL(req.url ?? '/', 'http://dashboard');
      const code = url.searchParams.get('login');
      if (req.method === 'GET' && url.pathname === '/' && code !== null) return login(gate, req, res, code);
      if (!gate.admits(req)) return sendJson(res, 401, 'TOKEN_REQUIRED', TOKEN_REQUIRED, { 'www-authenticate': 'Bearer realm="redflow"' });
    }
    handle(req, res)
      .then((handled) => {
        if (!handled) res.writeHead(404).end();
      })
      .catch((error: Error) => {
        // The handler answers its own errors; this is a last resort that keeps the process alive.
        reportFailure(req, error);
        if (!res.headersSent) sendJson(res, 500, 'INTERNAL', 'The dashboard failed to answer; its terminal has the details.');
        else res.end();
      });
  };
}
