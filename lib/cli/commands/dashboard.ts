import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

import { DISPLAY_PAYLOADS, type ClientOptions } from '../../core/client/client-context';
import { WorkflowClient } from '../../core/client/workflow-client';
import { openConnection, type RedisConnection } from '../../core/store/connection';
import type { RedisOptions } from '../../core/store/ioredis-types';
import { createDashboardHandler } from '../../dashboard/dashboard-handler';
import {
  acceptedHosts,
  gatedListener,
  isLoopback,
  isWildcard,
  MIN_DASHBOARD_TOKEN_LENGTH,
  parseAllowedHost,
  TokenGate,
  urlHost,
  type AllowedHost,
} from '../../dashboard/dashboard-login';
import { wholeNumber } from '../args';
import type { CommandInput, ServerCommand } from '../cli-command';
import { CliError } from '../cli-error';
import { out, printable, warn } from '../print';
import { cliCodec, connectionErrorText, redactUrl } from '../redis';

const options = {
  port: { type: 'string', default: '3667' },
  host: { type: 'string', default: '127.0.0.1' },
  'allow-actions': { type: 'boolean', default: false },
  token: { type: 'string' },
  'allowed-host': { type: 'string', multiple: true, default: [] },
  insecure: { type: 'boolean', default: false },
} as const;

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

/** What the dashboard command was asked for, checked before anything connects or listens. */
interface DashboardSettings {
  port: number;
  /** The address to listen on, IPv6 without brackets. */
  host: string;
  readOnly: boolean;
  token?: string;
  insecure: boolean;
  /** Extra accepted Host headers. */
  allowedHosts: AllowedHost[];
}

function allowedHost(value: string): AllowedHost {
  const allowed = parseAllowedHost(value);
  if (!allowed) {
    throw new CliError(
      '--allowed-host takes a host name or address with an optional port, such as dashboard.internal or dashboard.internal:8080 ' +
        `([fd00::1]:8080 for IPv6), got "${printable(value)}".`,
    );
  }
  return allowed;
}

function dashboardSettings(values: CommandInput<typeof options>['values']): DashboardSettings {
  const port = wholeNumber('--port', values.port, 65_535);
  const host = values.host.replace(/^\[(.*)\]$/, '$1');
  const token = values.token ?? process.env.REDFLOW_DASHBOARD_TOKEN;
  if (token !== undefined && token.length < MIN_DASHBOARD_TOKEN_LENGTH) {
    throw new CliError(
      `The dashboard token (--token or REDFLOW_DASHBOARD_TOKEN) must be at least ${MIN_DASHBOARD_TOKEN_LENGTH} characters long, got ${token.length}: ` +
        'generate one with "openssl rand -hex 32".',
    );
  }
  if (token === undefined && !values.insecure && !isLoopback(host)) {
    throw new CliError(
      `Refusing to serve the dashboard on ${host} without a token: anyone who can reach that address would see run inputs and outputs, ` +
        'and with --allow-actions could cancel runs. ' +
        'Set REDFLOW_DASHBOARD_TOKEN (or pass --token) to require a token, or pass --insecure to accept the risk.',
    );
  }
  const allowedHosts = values['allowed-host'].map(allowedHost);
  return { port, host, readOnly: !values['allow-actions'], token, insecure: values.insecure, allowedHosts };
}

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
    const why = connectionErrorText(error, url);
    warn(`Redis at ${shownUrl} is unreachable (${why}); the dashboard keeps retrying and shows errors until it is back.`);
  });
  redis.on('ready', () => {
    if (!down) return;
    down = false;
    warn(`Redis at ${shownUrl} is reachable again.`);
  });
}

async function runDashboard(settings: DashboardSettings, { values, redact }: CommandInput<typeof options>): Promise<void> {
  const { redis: redisUrl, prefix } = values;
  const { redis } = openConnection({ url: redisUrl, redisOptions: DASHBOARD_REDIS_OPTIONS });
  reportConnection(redis, redisUrl);
  // Wait for the first outcome only: a Redis that is down is reported, and the dashboard starts anyway.
  await new Promise<void>((resolve) => redis.once('ready', resolve).once('error', () => resolve()));
  // The connection is ours to close; the client does not watch it, so outages are reported once, above.
  const client = new WorkflowClient(redis, false, {
    prefix,
    commandTimeout: DASHBOARD_COMMAND_TIMEOUT_MS,
    codec: cliCodec(),
    [DISPLAY_PAYLOADS]: true,
  } as ClientOptions);
  const close = async () => {
    await client.close();
    redis.disconnect();
  };

  // The token and Host checks run before the handler, so it lets every request it sees in. One
  // process serves the pages and their actions, so a secret of its own signs their tokens: the
  // page loads (and says Redis is unreachable) even while Redis is down.
  const secret = randomBytes(32).toString('base64url');
  const handle = createDashboardHandler(client, { path: '/', authorize: () => true, readOnly: settings.readOnly, redact, secret });
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(settings.port, settings.host, resolve)).catch(async (error: Error) => {
    await close();
    throw new CliError(`Cannot listen on ${settings.host}:${settings.port} (${error.message}): choose another --port or --host.`);
  });
  const { port } = server.address() as AddressInfo;
  const hosts = acceptedHosts(settings.host, port, settings.allowedHosts);
  const gate = settings.token === undefined ? undefined : new TokenGate(settings.token);
  const reportFailure = (req: IncomingMessage, error: Error) =>
    warn(`The dashboard failed to answer ${req.method} ${printable(req.url ?? '')}: ${error.message}`);
  // Attached before the event loop runs again, so no request arrives before it.
  server.on('request', gatedListener(handle, hosts, gate, reportFailure));

  const origin = `http://${hosts[0]}`;
  const readOnly = settings.readOnly ? ' (read-only; --allow-actions enables cancel, re-run and resume)' : '';
  out(`Redflow dashboard for prefix "${printable(prefix)}" on ${origin}/${readOnly}`);
  if (gate) {
    out(`Sign in at ${origin}/?login=${gate.newLoginCode()} (the link works once; scripts send "Authorization: Bearer <token>").`);
  } else if (!isLoopback(settings.host)) {
    warn(
      `Warning: the dashboard listens on ${urlHost(settings.host)}:${port} without a token (--insecure): anyone who can reach it sees run inputs and outputs.`,
    );
  }
  if (isWildcard(settings.host) && !settings.allowedHosts.length) {
    const hint = 'pass --allowed-host <name> for each name or address browsers use to reach it.';
    warn(`It listens on every interface but answers only requests for Host "${hosts[0]}": ${hint}`);
  }

  const stop = () => server.close(() => void close().then(() => process.exit(0)));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
}

/**
 * `redflow dashboard`: the dashboard on its own HTTP server, behind the Host allow-list and, with
 * a token, the login gate (see lib/dashboard/dashboard-login.ts). It keeps running while Redis is
 * down, reconnecting by itself.
 */
export const dashboardCommand: ServerCommand<typeof options> = {
  usage: 'redflow dashboard [--port 3667] [--host 127.0.0.1] [--allow-actions] [--token T] [--allowed-host H[:P]]... [--insecure]',
  options,
  help: `Dashboard access:
  --token T             require this token (16 characters or more) on every request; prefer $REDFLOW_DASHBOARD_TOKEN,
                        which other users cannot read in the process list. A one-time login link is printed at start;
                        scripts send "Authorization: Bearer T".
  --allowed-host H[:P]  also answer requests for Host H:P (H alone: on the dashboard's port); repeatable. Requests for
                        any other Host get 421.
  --insecure            listen on an address other than loopback without a token.`,
  serve: (input) => runDashboard(dashboardSettings(input.values), input),
};
