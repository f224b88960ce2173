import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';

import { DashboardHttpError } from './dashboard-http-error';

/**
 * Checks made on every dashboard request before it is answered. They do not depend on the host
 * framework: the raw path as the client sent it, and the request headers.
 */

/**
 * Path tricks a proxy, a middleware or the framework might read differently from the dashboard:
 * dot segments (plain or percent-encoded), encoded slashes, backslashes and empty segments.
 */
const AMBIGUOUS_PATH = /(^|\/)\.\.?(\/|$)|%2e|%2f|%5c|\\|\/\//i;

const BAD_PATH_MESSAGE =
  'The request path contains "..", "//", a backslash, a percent escape or the dashboard path in another case; the dashboard answers plain paths only.';

function badPath(): DashboardHttpError {
  return new DashboardHttpError(400, 'BAD_PATH', BAD_PATH_MESSAGE);
}

/** 400 for a raw request path that could mean something else to another layer of the app. */
export function checkRawPath(rawUrl: string): void {
  if (AMBIGUOUS_PATH.test(rawUrl.split('?')[0])) throw badPath();
}

/**
 * 400 unless the raw path is exactly the path of the route that answers it (one trailing slash
 * aside). Host frameworks route paths that a proxy rule or a middleware on the dashboard path
 * does not see as its own: Express matches `/REDFLOW/api/runs` case-insensitively and Fastify
 * decodes `/%72edflow/api/runs`. The dashboard never needs a `%` in its path (run ids travel in
 * the query), so any escape is refused.
 *
 * @param routePath the route as the framework registered it, global prefix included
 */
export function checkRoutedPath(rawUrl: string, routePath: string): void {
  const path = rawUrl.split('?')[0];
  checkRawPath(path);
  if (path.includes('%') || (path !== routePath && path !== `${routePath}/`)) throw badPath();
}

/** Lower case, escapes decoded where they decode, backslashes as slashes: how a lenient router may read a path. */
function looseSegments(path: string): string[] {
  const decoded = path.replace(/(%[0-9a-f]{2})+/gi, (escapes) => {
    try {
      return decodeURIComponent(escapes);
    } catch {
      return escapes;
    }
  });
  return decoded
    .replace(/\\/g, '/')
    .toLowerCase()
    .split('/')
    .filter((s) => s !== '');
}

function containsRun(haystack: string[], needle: string[]): boolean {
  for (let i = 0; i + needle.length <= haystack.length; i++) if (needle.every((s, j) => haystack[i + j] === s)) return true;
  return false;
}

/**
 * 400 for a raw request path that some layer could read as one under the dashboard but that is
 * not plainly so: it names the dashboard path in any case or encoding, and either holds a trick
 * (`..`, `//`, a backslash, a `%` escape) or does not name the path in its exact case. Run before
 * routing, for every request of the app, so that no router, middleware or proxy rule reads such a
 * path differently from another. Other paths pass untouched.
 *
 * @param dashboardPath the dashboard's configured path, such as `/redflow`; `''` checks nothing
 */
export function checkPathNearDashboard(rawUrl: string, dashboardPath: string): void {
  const wanted = dashboardPath.split('/').filter((s) => s !== '');
  if (!wanted.length) return;
  const path = rawUrl.split('?')[0];
  if (
    !containsRun(
      looseSegments(path),
      wanted.map((s) => s.toLowerCase()),
    )
  )
    return;
  checkRawPath(path);
  if (path.includes('%') || !containsRun(path.split('/'), wanted)) throw badPath();
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * 403 for a read fetched by another site's script: `Sec-Fetch-Site` (sent by every current
 * browser) says where the request came from, whatever the app's CORS setup lets through.
 * Navigations (a link to the page) are allowed.
 */
export function checkNotCrossSiteRead(headers: IncomingHttpHeaders): void {
  const site = first(headers['sec-fetch-site']);
  if (site && site !== 'same-origin' && site !== 'none' && first(headers['sec-fetch-mode']) !== 'navigate') {
    throw new DashboardHttpError(403, 'CROSS_SITE', 'The dashboard answers its own page only, not requests from other sites.');
  }
}

const TOKEN_HEADER = 'x-redflow-csrf';
const TOKEN_TTL_MS = 24 * 60 * 60 * 1000;

/**
 * Issues and checks the page's anti-CSRF tokens: `<issued ms>.<nonce>.<HMAC of both>`. Tokens are
 * signed with the shared secret, or, for a page served while that secret cannot be read (Redis
 * down), with a random secret of this process, which only this process accepts.
 */
export class CsrfTokens {
  private readonly localSecret = randomBytes(32).toString('base64url');

  constructor(private readonly secret: () => Promise<string>) {}

  /** A new token for one page load, signed with the shared secret. */
  async issue(now = Date.now()): Promise<string> {
    return this.token(await this.secret(), now);
  }

  /** A new token signed with this process's own secret: for a page served while the shared one cannot be read. */
  issueLocal(now = Date.now()): string {
    return this.token(this.localSecret, now);
  }

  /** True when `token` was issued by this dashboard (this process, or any replica sharing the secret) within a day. */
  async verify(token: string | undefined, now = Date.now()): Promise<boolean> {
    const parts = token?.split('.') ?? [];
    if (parts.length !== 3) return false;
    const issued = parseInt(parts[0], 36);
    if (!Number.isFinite(issued) || issued > now + 60_000 || now - issued > TOKEN_TTL_MS) return false;
    const body = `${parts[0]}.${parts[1]}`;
    const signedWith = (secret: string) => {
      const expected = Buffer.from(this.sign(secret, body));
      const given = Buffer.from(parts[2]);
      return given.length === expected.length && timingSafeEqual(given, expected);
    };
    return signedWith(this.localSecret) || signedWith(await this.secret());
  }

  private token(secret: string, now: number): string {
    const body = `${now.toString(36)}.${randomBytes(12).toString('base64url')}`;
    return `${body}.${this.sign(secret, body)}`;
  }

  private sign(secret: string, body: string): string {
    return createHmac('sha256', secret).update(body).digest('base64url');
  }
}

/**
 * What a state-changing request (cancel, re-run, resume) must carry, so that no other site can make a
 * signed-in browser send it, whatever the app's CORS setup: it comes from the dashboard's own
 * origin (`Sec-Fetch-Site: same-origin`, or without it an `Origin` whose host is the request's `Host`), it is
 * JSON (which a plain HTML form cannot send), and it holds the token of a page this dashboard served.
 */
export async function checkActionRequest(headers: IncomingHttpHeaders, tokens: CsrfTokens): Promise<void> {
  const site = first(headers['sec-fetch-site']);
  const origin = first(headers.origin);
  if (site !== undefined) {
    if (site !== 'same-origin') throw crossOrigin();
  } else if (!origin || !sameHost(origin, headers)) {
    throw crossOrigin();
  }
  const type = first(headers['content-type']) ?? '';
  if (!/^application\/json\s*(;|$)/i.test(type)) {
    throw new DashboardHttpError(415, 'JSON_REQUIRED', 'Actions must be sent as JSON (content-type: application/json).');
  }
  if (!(await tokens.verify(first(headers[TOKEN_HEADER])))) {
    throw new DashboardHttpError(403, 'CSRF_TOKEN', 'The page is out of date or the request did not come from it: reload the dashboard and try again.');
  }
}

function crossOrigin(): DashboardHttpError {
  return new DashboardHttpError(403, 'CROSS_ORIGIN', 'Actions are accepted from the dashboard page itself only.');
}

/**
 * The Origin's host equals the request's Host. `X-Forwarded-Host` is not trusted here: a
 * cross-origin script can set it when CORS is permissive. Browsers that send `Sec-Fetch-Site`
 * (all current ones) never reach this check.
 */
function sameHost(origin: string, headers: IncomingHttpHeaders): boolean {
  let host: string;
  try {
    host = new URL(origin).host.toLowerCase();
  } catch {
    return false;
  }
  return headers.host?.toLowerCase() === host;
}
