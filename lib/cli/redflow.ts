#!/usr/bin/env node
/**
 * The `redflow` command: the dashboard standalone, and runs and workflows from a terminal.
 *
 *   redflow dashboard [--port 3667] [--host 127.0.0.1] [--allow-actions]
 *   redflow runs list [--workflow W] [--status S] [--limit 20] [--offset 0]
 *   redflow runs show <id>
 *   redflow runs cancel <id> [--reason R]
 *   redflow workflows
 *
 * Common options: --redis URL (or REDIS_URL), --prefix P (or REDFLOW_PREFIX), --json.
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { WorkflowClient } from '../core/client';
import { RUN_STATUSES, type RunStatus } from '../core/types';
import { createDashboardHandler } from '../dashboard/dashboard-handler';

const USAGE = `Usage:
  redflow dashboard [--port 3667] [--host 127.0.0.1] [--allow-actions]
  redflow runs list [--workflow W] [--status S] [--limit 20] [--offset 0]
  redflow runs show <id>
  redflow runs cancel <id> [--reason R]
  redflow workflows
Options: --redis URL (default $REDIS_URL or redis://127.0.0.1:6379), --prefix P (default $REDFLOW_PREFIX or "redflow"), --json`;

class CliError extends Error {}

const out = (text: string): void => {
  process.stdout.write(`${text}\n`);
};

function table(rows: Array<Record<string, unknown>>, columns: string[]): string {
  const cells = rows.map((r) => columns.map((c) => (r[c] === undefined || r[c] === null ? '' : String(r[c]))));
  const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i].length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd();
  return [line(columns), line(widths.map((w) => '-'.repeat(w))), ...cells.map(line)].join('\n');
}

function wholeNumber(option: string, value: string, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < 0 || n > max) throw new CliError(`${option} must be a whole number from 0 to ${max}, got "${value}".`);
  return n;
}

const time = (ms?: number) => (ms ? new Date(ms).toISOString() : '');

async function connect(url: string, prefix: string): Promise<WorkflowClient> {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new CliError(`"${url}" is not a Redis URL: use --redis redis://host:port (or set REDIS_URL).`);
  }
  if (!['redis:', 'rediss:'].includes(parsed.protocol)) throw new CliError(`"${url}" is not a Redis URL: use --redis redis://host:port (or set REDIS_URL).`);
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 1, retryStrategy: () => null });
  let cause: Error | undefined;
  redis.on('error', (error: Error) => (cause ??= error)); // reported below, once
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    const reason = (cause ?? (error as Error)).message;
    throw new CliError(`Cannot connect to Redis at ${url} (${reason}): check --redis or REDIS_URL, and that Redis is running.`);
  }
  return new WorkflowClient(redis, true, { prefix });
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
      workflow: { type: 'string' },
      status: { type: 'string' },
      limit: { type: 'string', default: '20' },
      offset: { type: 'string', default: '0' },
      reason: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
  });
  const [command, sub, id] = positionals;
  if (values.help || !command) return out(USAGE);
  const known = ['dashboard', 'workflows'].includes(command) || (command === 'runs' && ['list', 'show', 'cancel'].includes(sub ?? ''));
  if (!known) throw new CliError(`Unknown command "${positionals.join(' ')}".\n${USAGE}`);
  const client = await connect(values.redis!, values.prefix!);
  const print = (data: unknown, text: () => string): void => {
    out(values.json ? JSON.stringify(data, null, 2) : text());
  };

  if (command === 'dashboard') {
    const handle = createDashboardHandler(client, { path: '/', authorize: () => true, readOnly: !values['allow-actions'] });
    const server = createServer((req, res) => {
      void handle(req, res).then((handled) => {
        if (!handled) res.writeHead(404).end();
      });
    });
    const port = wholeNumber('--port', values.port!, 65_535);
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, values.host, resolve)).catch(async (error: Error) => {
      await client.close();
      throw new CliError(`Cannot listen on ${values.host}:${port} (${error.message}): choose another --port or --host.`);
    });
    const address = server.address() as { port: number };
    out(`Redflow dashboard for prefix "${values.prefix}" on http://${values.host}:${address.port}/${values['allow-actions'] ? '' : ' (read-only; --allow-actions enables cancel and re-run)'}`);
    const stop = () => server.close(() => void client.close().then(() => process.exit(0)));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    return;
  }

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
      if (status && !RUN_STATUSES.includes(status)) throw new CliError(`Unknown status "${status}". Use one of ${RUN_STATUSES.join(', ')}.`);
      const runs = await client.listRuns({ workflow: values.workflow, status, limit: wholeNumber('--limit', values.limit!), offset: wholeNumber('--offset', values.offset!) });
      print(runs, () =>
        runs.length
          ? table(runs.map((r) => ({ ...r, attempt: `${r.attempt}/${r.maxAttempts}`, created: time(r.createdAt), finished: time(r.finishedAt) })), ['id', 'workflow', 'status', 'attempt', 'created', 'finished'])
          : 'No runs match.',
      );
    } else if (sub === 'show') {
      if (!id) throw new CliError('Give the run id: redflow runs show <id>.');
      const run = await client.getRun(id);
      if (!run) throw new CliError(`Run "${id}" does not exist under prefix "${values.prefix}".`);
      const steps = await client.getRunSteps(id);
      print({ run, steps }, () =>
        [
          `${run.id}  ${run.workflow}  ${run.status}  attempt ${run.attempt}/${run.maxAttempts}`,
          `created ${time(run.createdAt)}  finished ${time(run.finishedAt)}`,
          `input: ${JSON.stringify(run.input)}`,
          run.output !== undefined ? `output: ${JSON.stringify(run.output)}` : '',
          run.error ? `error: ${run.error.name}: ${run.error.message}` : '',
          '',
          steps.length ? table(steps.map((s) => ({ ...s, duration: s.finishedAt !== undefined && s.startedAt !== undefined ? `${s.finishedAt - s.startedAt} ms` : '' })), ['seq', 'name', 'status', 'attempt', 'duration']) : 'No steps.',
        ]
          .filter((line, i, all) => line !== '' || i === all.length - 2)
          .join('\n'),
      );
    } else {
      if (!id) throw new CliError('Give the run id: redflow runs cancel <id>.');
      const canceled = await client.cancelRun(id, { reason: values.reason ?? 'canceled from the CLI' });
      print({ id, canceled }, () => (canceled ? `Canceled run ${id}.` : `Run ${id} was not canceled: it already ended or does not exist.`));
    }
  } finally {
    await client.close();
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  process.stderr.write(`${error instanceof CliError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') ? (error as Error).message : (error as Error).stack}\n`);
  process.exit(1);
});
