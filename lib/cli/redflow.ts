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
 *
 * Each command is one file in commands/, listed in command-registry.ts; this entry reads the
 * command line, runs the command it names and sets the exit code.
 */
import { CorruptRunDataError } from '../core/errors';
import { parseCommandLine, type OptionSpecs } from './args';
import type { CommandInput } from './cli-command';
import { CliError } from './cli-error';
import { COMMANDS, findCommand, USAGE } from './command-registry';
import { out, printable, safeJson, warn } from './print';
import { loadRedact } from './redact-module';
import { checkRedisUrl, connectOnce } from './redis';

/** Reads the command line and runs the command it names; a CliError is a refusal to print. */
async function main(argv: string[]): Promise<void> {
  const { values, positionals } = parseCommandLine(
    argv,
    COMMANDS.map(([, c]) => c.options ?? {}),
  );
  if (values.help || !positionals[0]) return out(USAGE);
  const found = findCommand(positionals);
  if (!found) throw new CliError(`Unknown command "${printable(positionals.join(' '))}".\n${USAGE}`);
  checkRedisUrl(values.redis);
  const input: CommandInput<OptionSpecs> = {
    values,
    args: found.args,
    redact: loadRedact(values.redact),
    print: (data, text) => out(values.json ? safeJson(data) : text()),
  };
  const { command } = found;
  if ('serve' in command) return command.serve(input);

  const client = await connectOnce(values.redis, values.prefix);
  try {
    await command.run(client, input);
  } finally {
    await client.close();
  }
}

main(process.argv.slice(2)).catch((error: unknown) => {
  if (error instanceof CorruptRunDataError) {
    const corrupt = `Run "${printable(error.runId)}" has corrupt data in Redis (${printable(error.detail)})`;
    warn(`${corrupt} and cannot be shown; "redflow runs list" shows it as a row marked corrupt.`);
    process.exit(1);
  }
  // A refusal or a malformed command line is its sentence; anything else is a fault, with its stack.
  const refusal = error instanceof CliError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS');
  warn(`${refusal ? (error as Error).message : (error as Error).stack}`);
  process.exit(1);
});
