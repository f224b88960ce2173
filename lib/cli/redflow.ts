#!/usr/bin/env node
/**
 * The `redflow` command: the dashboard standalone, and runs and workflows from a terminal.
 *
 *   redflow dashboard [--port 3667] [--host 127.0.0.1] [--allow-actions]
 *                     [--token T] [--allowed-host H[:P]]... [--insecure]
 *   redflow runs list [--workflow W] [--status S] [--limit 20] [--offset 0]
 *   redflow runs show <id>
 *   redflow runs cancel <id> [--reason R]
 *   redflow runs terminate <id> [--reason R]
 *   redflow runs delete <id> [--force]
 *   redflow runs rerun <id>
 *   redflow runs resume <id>
 *   redflow workflows
 *
 * Common options: --redis URL (or REDIS_URL), --prefix P (or REDFLOW_PREFIX), --json, and
 * --redact <module>, a JavaScript module exporting the dashboard's `redact(run)` function.
 *
 * The dashboard shows run inputs and outputs (and with --allow-actions cancels runs), so it is
 * closed to strangers:
 * - It answers only requests whose Host header names it (its address, on a loopback address also
 *   localhost, 127.0.0.1 and [::1], plus each --allowed-host); others get 421. This stops DNS
 *   rebinding, where a web page's own host name is pointed at 127.0.0.1.
 * - With --token (or REDFLOW_DASHBOARD_TOKEN) every request needs `Authorization: Bearer <token>`
 *   or the session cookie that the one-time login link printed at start sets.
 * - It refuses to listen on an address other than loopback without a token, unless --insecure.
 * - It keeps running while Redis is down, reconnecting by itself.
 *
 * Everything printed is safe for a terminal: the Redis password never appears (`redis://u:***@h`),
 * values of secret-looking keys are masked (see `maskSecrets`), and control characters in run
 * data are shown escaped (`\x1b`), so stored data cannot move the cursor or recolour the screen.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { isIPv4, isIPv6, type AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import type { RedisOptions } from 'ioredis';
import { WorkflowClient } from '../core/client/workflow-client';
import { CorruptRunDataError, RunNotEndedError, RunNotFoundError, RunNotResumableError } from '../core/errors';
import { openConnection, type RedisConnection } from '../core/store/connection';
import { RUN_STATUSES, type RunState, type RunStatus, type StepState } from '../core/definition/types';
import { createDashboardHandler } from '../dashboard/dashboard-handler';
import type { DashboardRun } from '../dashboard/dashboard-options';
import { redactRun, redactSummary } from '../dashboard/redact';

const USAGE = `Usage:
  redflow dashboard [--port 3667] [--host 127.0.0.1] [--allow-actions] [--token T] [--allowed-host H[:P]]... [--insecure]
  redflow runs list [--workflow W] [--status S] [--limit 20] [--offset 0]
  redflow runs show <id>
  redflow runs cancel <id> [--reason R]
  redflow runs terminate <id> [--reason R]    end it now: no cooperative cancel, no cleanup, no onFailure
  redflow runs delete <id> [--force]          delete an ended run with its steps; --force terminates a live one first
  redflow runs rerun <id>
  redflow runs resume <id>
  redflow workflows
Options: --redis URL (default $REDIS_URL or redis://127.0.0.1:6379), --prefix P (default $REDFLOW_PREFIX or "redflow"), --json
  --redact M            a JavaScript module exporting a function (run) => run, applied after the default masking to
                        every run shown (runs show, runs list, the dashboard), like the dashboard's redact option.
                        runs list prints summaries; with --json, whole runs.
Dashboard access:
  --token T             require this token (16 characters or more) on every request; prefer $REDFLOW_DASHBOARD_TOKEN,
                        which other users cannot read in the process list. A one-time login link is printed at start;
                        scripts send "Authorization: Bearer T".
  --allowed-host H[:P]  also answer requests for Host H:P (H alone: on the dashboard's port); repeatable. Requests for
                        any other Host get 421.
  --insecure            listen on an address other than loopback without a token.`;

class CliError extends Error {}

const out = (text: string): void => {
  process.stdout.write(`${text}\n`);
};

const warn = (text: string): void => {
  process.stderr.write(`${text}\n`);
};

// ---------------------------------------------------------------------------------------------
// Terminal safety: what run data looks like once printed

/**
 * Characters a terminal may act on instead of showing: C0 controls (ESC starts colour and cursor
 * sequences, CR and BS overwrite what was printed), DEL, C1 controls (0x9b is an 8-bit CSI), line
 * and paragraph separators, and the bidirectional overrides that reorder the text around them.
 */
// eslint-disable-next-line no-control-regex
const TERMINAL_CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
/** The same minus C0, which JSON.stringify already escapes. */
const JSON_UNESCAPED_CONTROL = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const NAMED_ESCAPES: Record<string, string> = { '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const hex = (char: string, digits: number) => char.charCodeAt(0).toString(16).padStart(digits, '0');

/** `text` with every control character written as visible text: `\n`, `\r`, `\t`, `\x1b`, `\u202e`. */
function printable(text: string): string {
  return text.replace(TERMINAL_CONTROL, (c) => NAMED_ESCAPES[c] ?? (c <= '\u00ff' ? `\\x${hex(c, 2)}` : `\\u${hex(c, 4)}`));
}

/**
 * Pretty JSON in which the control characters JSON.stringify leaves raw (DEL, C1, separators,
 * bidi overrides) are `\uXXXX` escapes too. They can only occur inside strings, where the escape
 * means the same character, so the output parses back to the same value.
 */
function safeJson(value: unknown): string {
  return JSON.stringify(value, null, 2).replace(JSON_UNESCAPED_CONTROL, (c) => `\\u${hex(c, 4)}`);
}

/** A single-line, escaped rendering of a JSON value for text output. */
const jsonText = (value: unknown): string => printable(JSON.stringify(value) ?? 'undefined');

/** Any value as one printable cell or field. */
const cell = (value: unknown): string => (value === undefined || value === null ? '' : printable(String(value)));

function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  const cells = rows.map((r) => columns.map((c) => cell(r[c])));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd();
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

type Redact = (run: DashboardRun) => DashboardRun;

/**
 * A run and its steps as the CLI shows them: the whole run masked (inputs, outputs, errors,
 * progress, a waiting step's event match...) as the dashboard masks it, then the --redact function.
 */
function shownRun(run: RunState, steps: StepState[], redact: Redact | undefined): { run: RunState; steps: StepState[] } {
  const { steps: shownSteps, ...shown } = redactRun({ ...run, steps }, redact);
  return { run: shown, steps: shownSteps };
}

/**
 * The function a --redact module exports (as module.exports, default or `redact`), the same as
 * the dashboard's `redact` option.
 */
function loadRedact(path: string | undefined): Redact | undefined {
  if (path === undefined) return undefined;
  const shown = printable(path);
  let loaded: unknown;
  try {
    loaded = require(resolve(path)) as unknown;
  } catch (error) {
    throw new CliError(`Cannot load the --redact module "${shown}" (${printable((error as Error).message.split('\n')[0])}): give the path of a JavaScript module that exports a function (run) => run.`);
  }
  const exported = loaded as { default?: unknown; redact?: unknown } | undefined;
  const redact = typeof loaded === 'function' ? loaded : typeof exported?.default === 'function' ? exported.default : exported?.redact;
  if (typeof redact !== 'function') throw new CliError(`The --redact module "${shown}" exports no function: export a function (run) => run, as module.exports or as "redact".`);
  return redact as Redact;
}

// ---------------------------------------------------------------------------------------------
// Options

function wholeNumber(option: string, value: string, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < 0 || n > max) throw new CliError(`${option} must be a whole number from 0 to ${max}, got "${printable(value)}".`);
  return n;
}

const time = (ms?: number) => (ms ? new Date(ms).toISOString() : '');

// ---------------------------------------------------------------------------------------------
// Redis

/** The URL as it may be printed: its password, if any, replaced by `***`. */
function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) {
      parsed.password = '***';
      return parsed.href;
    }
    if (parsed.host) return url;
  } catch {
    // Falls through to the pattern below.
  }
  // Not a URL with an authority to the parser ("redis:/user:pw@host", a typo), but it may still
  // read like one to a person: hide what sits between the last ":" and the "@" of "user:pw@host".
  return url.replace(/^([^@\s]*?:)[^:@\s]*@/, '$1***@');
}

/** Throws a CliError unless `url` is a redis:// or rediss:// URL with a host. */
function checkRedisUrl(url: string): void {
  let protocol: string | undefined;
  let host: string | undefined;
  try {
    ({ protocol, host } = new URL(url));
  } catch {
    protocol = undefined;
  }
  if ((protocol !== 'redis:' && protocol !== 'rediss:') || !host) {
    throw new CliError(`"${printable(redactUrl(url))}" is not a Redis URL: use --redis redis://host:port (or set REDIS_URL).`);
  }
}

/**
 * What a connection error says, safe to print: a failed dual-stack connect is an AggregateError
 * with an empty message, and the URL's password is cut out in case the error quotes it.
 */
function reason(error: Error, url: string): string {
  const text = error.message || (error as { code?: string }).code || error.name;
  const password = new URL(url).password;
  if (!password) return text;
  return [password, decodedOrSame(password)].reduce((safe, secret) => safe.split(secret).join('***'), text);
}

function decodedOrSame(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a stray "%" that is not an escape
  }
}

/** A client for one command: it connects once and fails at once when Redis does not answer. */
async function connectOnce(url: string, prefix: string): Promise<WorkflowClient> {
  const { redis } = openConnection({ url, redisOptions: { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 1, retryStrategy: () => null } });
  let cause: Error | undefined;
  redis.on('error', (error: Error) => (cause ??= error)); // reported below, once
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    throw new CliError(`Cannot connect to Redis at ${redactUrl(url)} (${reason(cause ?? (error as Error), url)}): check --redis or REDIS_URL, and that Redis is running.`);
  }
  return new WorkflowClient(redis, true, { prefix });
}

/**
 * The dashboard's connection outlives Redis restarts: it reconnects forever, 100 ms after a loss
 * and then up to every 2 s; while it is down a call fails after one reconnect attempt or
 * DASHBOARD_COMMAND_TIMEOUT_MS, so a page load gets an error instead of hanging.
 */
const DASHBOARD_REDIS_OPTIONS: RedisOptions = {
  connectTimeout: 3000,
  maxRetriesPerRequest: 1,
  retryStrategy: (attempt: number) => Math.min(100 * 2 ** (attempt - 1), 2000),
};
const DASHBOARD_COMMAND_TIMEOUT_MS = 3000;

/**
 * Prints one line when Redis becomes unreachable and one when it is back. The listener also
 * keeps ioredis from printing every failed reconnect attempt as an unhandled error.
 */
function reportConnection(redis: RedisConnection, url: string): void {
  const shownUrl = redactUrl(url);
  let down = false;
  redis.on('error', (error: Error) => {
    if (down) return;
    down = true;
    warn(`Redis at ${shownUrl} is unreachable (${reason(error, url)}); the dashboard keeps retrying and shows errors until it is back.`);
  });
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    warn(`Redis at ${shownUrl} is reachable again.`);
  });
}

// ---------------------------------------------------------------------------------------------
// Dashboard access

const MIN_TOKEN_LENGTH = 16;
const SESSION_COOKIE = 'redflow_session';

/** What the dashboard command was asked for, checked before anything connects or listens. */
interface DashboardSettings {
  port: number;
  /** The address to listen on, IPv6 without brackets. */
  host: string;
  readOnly: boolean;
  token?: string;
  insecure: boolean;
  /** Extra accepted Host headers; `port` undefined means the dashboard's own port. */
  allowedHosts: Array<{ host: string; port?: number }>;
}

/** True for 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost. Other names may resolve anywhere. */
function isLoopback(host: string): boolean {
  const h = host.toLowerCase();
  if (h === 'localhost' || h === '::1') return true;
  const ipv4 = /^::ffff:(.+)$/.exec(h)?.[1] ?? h;
  return isIPv4(ipv4) && ipv4.startsWith('127.');
}

const isWildcard = (host: string) => host === '0.0.0.0' || host === '::';

/** A host as it appears in a URL or a Host header: lower case, IPv6 in brackets. */
const urlHost = (host: string) => (isIPv6(host) ? `[${host.toLowerCase()}]` : host.toLowerCase());

/** `host[:port]` of a Host header or an --allowed-host value: a name, an IPv4 or a bracketed IPv6. */
const HOST_AND_PORT = /^(\[[0-9a-f:.]+\]|[^\s:[\]/@?#]+)(?::(\d{1,5}))?$/i;

/** The `host:port` a Host header names (port 80 when it has none), or undefined when malformed. */
function hostHeaderKey(header: string | undefined): string | undefined {
  const match = HOST_AND_PORT.exec(header?.trim() ?? '');
  if (!match) return undefined;
  return `${match[1].toLowerCase()}:${match[2] === undefined ? 80 : Number(match[2])}`;
}

function parseAllowedHost(value: string): { host: string; port?: number } {
  const match = HOST_AND_PORT.exec(value.trim());
  const port = match?.[2] === undefined ? undefined : Number(match[2]);
  if (!match || (port !== undefined && port > 65_535)) {
    throw new CliError(`--allowed-host takes a host name or address with an optional port, such as dashboard.internal or dashboard.internal:8080 ([fd00::1]:8080 for IPv6), got "${printable(value)}".`);
  }
  return { host: match[1].toLowerCase(), port };
}

function dashboardSettings(values: { port?: string; host?: string; token?: string; insecure?: boolean; 'allow-actions'?: boolean; 'allowed-host'?: string[] }): DashboardSettings {
  const port = wholeNumber('--port', values.port!, 65_535);
  const host = values.host!.replace(/^\[(.*)\]$/, '$1');
  const token = values.token ?? process.env.REDFLOW_DASHBOARD_TOKEN;
  if (token !== undefined && token.length < MIN_TOKEN_LENGTH) {
    throw new CliError(`The dashboard token (--token or REDFLOW_DASHBOARD_TOKEN) must be at least ${MIN_TOKEN_LENGTH} characters long, got ${token.length}: generate one with "openssl rand -hex 32".`);
  }
  if (token === undefined && !values.insecure && !isLoopback(host)) {
    throw new CliError(
      `Refusing to serve the dashboard on ${host} without a token: anyone who can reach that address would see run inputs and outputs, and with --allow-actions could cancel runs. ` +
        'Set REDFLOW_DASHBOARD_TOKEN (or pass --token) to require a token, or pass --insecure to accept the risk.',
    );
  }
  const allowedHosts = (values['allowed-host'] ?? []).map(parseAllowedHost);
  return { port, host, readOnly: !values['allow-actions'], token, insecure: Boolean(values.insecure), allowedHosts };
}

/** The `host:port` keys the dashboard answers to, the first one being the one it prints. */
function acceptedHosts(settings: DashboardSettings, port: number): string[] {
  const extra = settings.allowedHosts.map((a) => `${a.host}:${a.port ?? port}`);
  const own = [`${urlHost(settings.host)}:${port}`];
  if (isLoopback(settings.host)) own.push(`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`);
  // An address that listens on every interface is no name a browser uses: print the first
  // --allowed-host instead when there is one.
  const all = isWildcard(settings.host) && extra.length ? [...extra, ...own] : [...own, ...extra];
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
class TokenGate {
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

const TOKEN_REQUIRED = 'This dashboard requires a token: open the one-time login link that "redflow dashboard" printed when it started, or send the header "Authorization: Bearer <token>".';
const LOGIN_LINK_USED =
  'This login link was used already or is not valid: each link works once. Restart "redflow dashboard" for a new one, or send the header "Authorization: Bearer <token>".';

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
 * The request listener around the dashboard handler: the Host check, then the token check, then
 * the dashboard. Both checks answer before the dashboard (and its authorize) sees the request.
 */
function gatedListener(handle: ReturnType<typeof createDashboardHandler>, hosts: string[], gate: TokenGate | undefined) {
  const accepted = new Set(hosts);
  const misdirected = `This dashboard answers to Host "${hosts[0]}" only; start it with --allowed-host <name> to allow another.`;
  return (req: IncomingMessage, res: ServerResponse): void => {
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
        warn(`The dashboard failed to answer ${req.method} ${printable(req.url ?? '')}: ${error.message}`);
        if (!res.headersSent) sendJson(res, 500, 'INTERNAL', 'The dashboard failed to answer; its terminal has the details.');
        else res.end();
      });
  };
}

async function runDashboard(settings: DashboardSettings, redisUrl: string, prefix: string, redact: Redact | undefined): Promise<void> {
  const { redis } = openConnection({ url: redisUrl, redisOptions: DASHBOARD_REDIS_OPTIONS });
  reportConnection(redis, redisUrl);
  // Wait for the first outcome only: a Redis that is down is reported, and the dashboard starts anyway.
  await new Promise<void>((resolve) => redis.once('ready', resolve).once('error', () => resolve()));
  // The connection is ours to close; the client does not watch it, so outages are reported once, above.
  const client = new WorkflowClient(redis, false, { prefix, commandTimeoutMs: DASHBOARD_COMMAND_TIMEOUT_MS });
  const close = async () => {
    await client.close();
    redis.disconnect();
  };

  // The token and Host checks run before the handler, so it lets every request it sees in. One
  // process serves the pages and their actions, so a secret of its own signs their tokens: the
  // page loads (and says Redis is unreachable) even while Redis is down.
  const handle = createDashboardHandler(client, { path: '/', authorize: () => true, readOnly: settings.readOnly, redact, secret: randomBytes(32).toString('base64url') });
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(settings.port, settings.host, resolve)).catch(async (error: Error) => {
    await close();
    throw new CliError(`Cannot listen on ${settings.host}:${settings.port} (${error.message}): choose another --port or --host.`);
  });
  const { port } = server.address() as AddressInfo;
  const hosts = acceptedHosts(settings, port);
  const gate = settings.token === undefined ? undefined : new TokenGate(settings.token);
  // Attached before the event loop runs again, so no request arrives before it.
  server.on('request', gatedListener(handle, hosts, gate));

  const origin = `http://${hosts[0]}`;
  out(`Redflow dashboard for prefix "${printable(prefix)}" on ${origin}/${settings.readOnly ? ' (read-only; --allow-actions enables cancel, re-run and resume)' : ''}`);
  if (gate) out(`Sign in at ${origin}/?login=${gate.newLoginCode()} (the link works once; scripts send "Authorization: Bearer <token>").`);
  else if (!isLoopback(settings.host)) warn(`Warning: the dashboard listens on ${urlHost(settings.host)}:${port} without a token (--insecure): anyone who can reach it sees run inputs and outputs.`);
  if (isWildcard(settings.host) && !settings.allowedHosts.length) {
    warn(`It listens on every interface but answers only requests for Host "${hosts[0]}": pass --allowed-host <name> for each name or address browsers use to reach it.`);
  }

  const stop = () => server.close(() => void close().then(() => process.exit(0)));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

// ---------------------------------------------------------------------------------------------
// Commands

function runText(run: RunState, steps: StepState[]): string {
  return [
    `${cell(run.id)}  ${cell(run.workflow)}  ${cell(run.status)}  attempt ${run.attempt}/${run.maxAttempts}`,
    `created ${time(run.createdAt)}  finished ${time(run.finishedAt)}`,
    run.progress !== undefined ? `progress: ${jsonText(run.progress)}` : '',
    `input: ${jsonText(run.input)}`,
    run.output !== undefined ? `output: ${jsonText(run.output)}` : '',
    run.error ? `error: ${cell(run.error.name)}: ${cell(run.error.message)}` : '',
    run.compensated ? 'compensated: every compensation of its completed steps ran' : '',
    run.compensationError ? `compensation error: ${cell(run.compensationError.name)}: ${cell(run.compensationError.message)}` : '',
    '',
    steps.length ? table(steps.map((s) => ({ ...s, tries: s.attempts ?? '', duration: s.finishedAt !== undefined && s.startedAt !== undefined ? `${s.finishedAt - s.startedAt} ms` : '' })), ['seq', 'name', 'status', 'attempt', 'tries', 'duration']) : 'No steps.',
  ]
    .filter((line, i, all) => line !== '' || i === all.length - 2)
    .join('\n');
}

/** `client.resume`, with the refusal of a run that is not failed, canceled, compensation_failed or terminated as a one-sentence CLI error. */
async function resumeRun(client: WorkflowClient, id: string): Promise<boolean> {
  try {
    return await client.resume(id);
  } catch (error) {
    if (error instanceof RunNotResumableError) throw new CliError(`Run "${printable(id)}" is ${error.status}: only a failed, canceled, compensation_failed or terminated run can be resumed.`);
    throw error;
  }
}

async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
      prefix: { type: 'string', default: process.env.REDFLOW_PREFIX ?? 'redflow' },
      json: { type: 'boolean', default: false },
      port: { type: 'string', default: '3667' },
      host: { type: 'string', default: '127.0.0.1' },
      'allow-actions': { type: 'boolean', default: false },
      token: { type: 'string' },
      'allowed-host': { type: 'string', multiple: true, default: [] },
      insecure: { type: 'boolean', default: false },
      workflow: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string', default: '20' },
      offset: { type: 'string', default: '0' },
      reason: { type: 'string' },
      force: { type: 'boolean', default: false },
      redact: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  const [command, sub, id] = positionals;
  if (values.help || !command) return out(USAGE);
  const known = ['dashboard', 'workflows'].includes(command) || (command === 'runs' && ['list', 'show', 'cancel', 'terminate', 'delete', 'rerun', 'resume'].includes(sub ?? ''));
  if (!known) throw new CliError(`Unknown command "${printable(positionals.join(' '))}".\n${USAGE}`);
  checkRedisUrl(values.redis!);
  const redact = loadRedact(values.redact);
  if (command === 'dashboard') return runDashboard(dashboardSettings(values), values.redis!, values.prefix!, redact);

  const client = await connectOnce(values.redis!, values.prefix!);
  const missing = (runId: string) => new CliError(`Run "${printable(runId)}" does not exist under prefix "${printable(values.prefix!)}".`);
  const print = (data: unknown, text: () => string): void => {
    out(values.json ? safeJson(data) : text());
  };
  try {
    if (command === 'workflows') {
      const workflows = await client.listWorkflows();
      print(workflows, () =>
        table(
          workflows.map((w) => ({ ...w, maxConcurrency: w.maxConcurrency === Infinity ? 'unlimited' : w.maxConcurrency, events: w.events.join(','), crons: w.crons.join(',') })),
          ['name', 'queue', 'maxAttempts', 'maxConcurrency', 'events', 'crons', 'owner'],
        ),
      );
    } else if (sub === 'list') {
      const status = values.status as RunStatus | undefined;
      if (status && !RUN_STATUSES.includes(status)) throw new CliError(`Unknown status "${printable(status)}". Use one of ${RUN_STATUSES.join(', ')}.`);
      const page = { workflow: values.workflow, status, limit: wholeNumber('--limit', values.limit!), offset: wholeNumber('--offset', values.offset!) };
      if (values.json) {
        // Whole runs, as scripts expect them; the table below reads summaries only.
        const runs = (await client.listRuns(page)).map((r) => shownRun(r, [], redact).run);
        out(safeJson(runs));
      } else {
        const rows = (await client.listRunSummaries(page)).map((r) => redactSummary(r, redact));
        out(
          rows.length
            ? table(
                rows.map((r) => ({ ...r, status: r.corrupt === undefined ? r.status : 'corrupt', attempt: r.attempt === undefined ? '' : `${r.attempt}/${r.maxAttempts ?? '?'}`, created: time(r.createdAt), finished: time(r.finishedAt) })),
                ['id', 'workflow', 'status', 'attempt', 'created', 'finished'],
              )
            : 'No runs match.',
        );
      }
    } else if (sub === 'show') {
      if (!id) throw new CliError('Give the run id: redflow runs show <id>.');
      const stored = await client.getRun(id);
      if (!stored) throw missing(id);
      const { run, steps } = shownRun(stored, await client.getRunSteps(id), redact);
      print({ run, steps }, () => runText(run, steps));
    } else if (sub === 'rerun') {
      if (!id) throw new CliError('Give the run id: redflow runs rerun <id>.');
      const stored = await client.getRun(id);
      if (!stored) throw missing(id);
      if (!['failed', 'canceled', 'terminated'].includes(stored.status)) throw new CliError(`Run "${printable(id)}" is ${stored.status}: only a failed, canceled or terminated run can be re-run.`);
      const { id: runId } = await client.rerun(id);
      print({ id, runId }, () => `Re-ran run ${printable(id)} as a new run ${printable(runId)}, with the same input.`);
    } else if (sub === 'resume') {
      if (!id) throw new CliError('Give the run id: redflow runs resume <id>.');
      const resumed = await resumeRun(client, id);
      if (!resumed) throw missing(id);
      print({ id, resumed }, () => `Resumed run ${printable(id)}: it goes on from its first incomplete step.`);
    } else if (sub === 'terminate') {
      if (!id) throw new CliError('Give the run id: redflow runs terminate <id>.');
      let terminated: boolean;
      try {
        terminated = await client.terminate(id, { reason: values.reason ?? 'terminated from the CLI' });
      } catch (error) {
        if (error instanceof RunNotFoundError) throw missing(id);
        throw error;
      }
      // Terminating a run that already ended is done (exit 0), as with cancel.
      const status = terminated ? 'terminated' : await client.getRun(id).then((run) => run?.status ?? 'deleted', () => 'unreadable');
      print({ id, terminated }, () => (terminated ? `Terminated run ${printable(id)}.` : `Run ${printable(id)} was not terminated: it already ended (${status}).`));
    } else if (sub === 'delete') {
      if (!id) throw new CliError('Give the run id: redflow runs delete <id> [--force].');
      let deleted: boolean;
      try {
        deleted = await client.deleteRun(id, { force: values.force });
      } catch (error) {
        if (error instanceof RunNotEndedError) throw new CliError(`Run "${printable(id)}" is ${error.status}: only an ended run can be deleted. Terminate or cancel it first, or pass --force.`);
        throw error;
      }
      if (!deleted) throw missing(id);
      print({ id, deleted }, () => `Deleted run ${printable(id)} and everything it stored.`);
    } else {
      if (!id) throw new CliError('Give the run id: redflow runs cancel <id>.');
      const canceled = await client.cancelRun(id, { reason: values.reason ?? 'canceled from the CLI' });
      // Canceling a run that already ended is done (exit 0); a run that does not exist is an error.
      const status = canceled ? 'canceled' : await client.getRun(id).then((run) => run?.status, () => 'unreadable');
      if (!status) throw missing(id);
      print({ id, canceled }, () => (canceled ? `Canceled run ${printable(id)}.` : `Run ${printable(id)} was not canceled: it already ended (${status}).`));
    }
  } finally {
    await client.close();
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof CorruptRunDataError) {
    warn(`Run "${printable(error.runId)}" has corrupt data in Redis (${printable(error.detail)}) and cannot be shown; "redflow runs list" shows it as a row marked corrupt.`);
    process.exit(1);
  }
  warn(`${error instanceof CliError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? (error as Error).message : (error as Error).stack}`);
  process.exit(1);
});
