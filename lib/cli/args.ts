import { parseArgs, type ParseArgsConfig } from 'node:util';

import { CliError } from './cli-error';
import { printable } from './print';

/** How one option is read from the command line (as `parseArgs` of node:util takes it). */
export interface OptionSpec {
  type: 'string' | 'boolean';
  multiple?: boolean;
  default?: string | boolean | readonly string[];
}

/** Options by their long name, without the leading `--`. */
export type OptionSpecs = Readonly<Record<string, OptionSpec>>;

type OptionValue<S> = S extends { type: 'boolean' }
  ? boolean
  : S extends { multiple: true }
    ? string[]
    : S extends { default: string }
      ? string
      : string | undefined;

/** What the command line gave for each option: booleans default to false, lists to []. Any options at all: unknown values. */
export type OptionValues<O> = string extends keyof O ? Record<string, unknown> : { -readonly [K in keyof O]: OptionValue<O[K]> };

/** The options every command takes. */
export const COMMON_OPTIONS = {
  redis: { type: 'string', default: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379' },
  prefix: { type: 'string', default: process.env.REDFLOW_PREFIX ?? 'redflow' },
  json: { type: 'boolean', default: false },
  redact: { type: 'string' },
  help: { type: 'boolean', default: false },
} as const satisfies OptionSpecs;

/** The values of the options every command takes. */
export type CommonValues = OptionValues<typeof COMMON_OPTIONS>;

/** The help text of the options every command takes. */
export const COMMON_OPTIONS_HELP = `Options: --redis URL (default $REDIS_URL or redis://127.0.0.1:6379), --prefix P (default $REDFLOW_PREFIX or "redflow"), --json
  --redact M            a JavaScript module exporting a function (run) => run, applied after the default masking to
                        every run shown (runs show, runs list, the dashboard), like the dashboard's redact option.
                        runs list prints summaries; with --json, whole runs.`;

/**
 * Reads the command line. Every command's options are accepted whichever command is named, as
 * one table: commands that take the same option must declare it the same way.
 *
 * @param commandOptions the options of each command, beside the common ones
 */
export function parseCommandLine(argv: string[], commandOptions: OptionSpecs[]): { values: CommonValues & Record<string, unknown>; positionals: string[] } {
  const options = Object.assign({}, COMMON_OPTIONS, ...commandOptions) as ParseArgsConfig['options'];
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options });
  return { values: values as CommonValues & Record<string, unknown>, positionals };
}

/** The value of a numeric option, or a CliError when it is not a whole number from 0 to `max`. */
export function wholeNumber(option: string, value: string, max = Number.MAX_SAFE_INTEGER): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isInteger(n) || n < 0 || n > max) {
    throw new CliError(`${option} must be a whole number from 0 to ${max}, got "${printable(value)}".`);
  }
  return n;
}

/**
 * The run id a `runs` command was given (its first argument), or a CliError that shows the syntax.
 *
 * @param syntax the command as the message shows it, such as `runs show <id>`
 */
export function runIdArgument(args: string[], syntax: string): string {
  return firstArgument(args, 'the run id', syntax);
}

/** The first word after a command's name, or a CliError asking for `what` with the command's syntax. */
export function firstArgument(args: string[], what: string, syntax: string): string {
  const [value] = args;
  if (!value) throw new CliError(`Give ${what}: redflow ${syntax}.`);
  return value;
}
