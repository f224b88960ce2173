import type { ScriptName } from './scripts/script-loader';

/**
 * The ARGV of every script, in order: the twin of the `-- ARGV:` line in each script's header
 * (`scripts/<name>-<number of KEYS>.lua`, read by `scriptArgs()`), which
 * `test/unit/script-args.spec.ts` compares with it, names and count. A last name starting with
 * `...` takes the rest of ARGV (a list). Every call builds its ARGV with `scriptArgv()` from an
 * object with these names, so the order is written here and in the script's header only.
 */
export const SCRIPT_ARGS = {
  enqueue: [
    'base',
    'runId',
    'workflow',
    'queue',
    'maxAttempts',
    'input',
    'now',
    'runAt',
    'idempotencyKey',
    'idempotencyTtlSec',
    'debounceKey',
    'debouncePeriodMs',
    'debounceTimeoutMs',
    'localFlow',
    '...extra',
  ],
  claim: ['base', 'token', 'now', 'leaseUntil', '...skip'],
  checkpoint: ['runId', 'token', 'now', 'base', '...records'],
  finish: ['base', 'runId', 'token', 'now', 'outcome', 'payload', 'dueAt', 'nextToken', 'leaseUntil', 'waitFields', '...records'],
  cancel: ['base', 'runId', 'now', 'errorJson', 'reason', 'cancelChannel', 'compensate'],
  terminate: ['base', 'runId', 'now', 'errorJson', 'reason'],
  'delete-run': ['base', 'runId', 'now', 'force', 'errorJson', 'reason'],
  resume: ['base', 'runId', 'now'],
  heartbeat: ['base', 'leaseUntil', '...leases'],
  promote: ['base', 'now', 'batch'],
  reap: ['base', 'now', 'batch', 'maxRecoveries'],
  'start-child': [
    'base',
    'runId',
    'token',
    'field',
    'seq',
    'attempt',
    'now',
    'mode',
    'childId',
    'workflow',
    'queue',
    'maxAttempts',
    'input',
    'runAt',
    'idempotencyKey',
    'idempotencyTtlSec',
    'deadline',
    'localFlow',
    'debounceKey',
    'debouncePeriodMs',
    'debounceTimeoutMs',
    '...extra',
  ],
  'emit-event': [
    'base',
    'eventId',
    'event',
    'payload',
    'now',
    'emitAt',
    'idempotencyKey',
    'idempotencyTtlSec',
    'runId',
    'token',
    'field',
    'seq',
    'attempt',
    'fields',
  ],
  'fire-events': ['base', 'now', 'batch'],
  'cron-fire': ['base', 'cronId', 'tick', 'next', 'workflow', 'input', 'now', 'overlap', 'mode', 'limit', 'priority'],
  'cron-pause': ['base', 'cronId', 'paused', 'next'],
  'queue-pause': ['base', 'queue', 'paused'],
  'enqueue-many': ['base', 'now', '...items'],
  'rotate-payload': ['base', 'type', 'field', 'old', 'new'],
  schedule: ['base', 'cronId', 'def', 'next', 'workflow', 'local'],
  unschedule: ['base', 'cronId'],
  cleanup: ['base', 'cutoff', 'batch'],
  prune: ['base', 'cutoff', 'batch', 'succeeded', 'failed', 'canceled', 'terminated'],
  'sync-registry': ['base', 'owner', 'now', 'prune', '...entries'],
  'backfill-run-index': ['base', 'token', 'leaseMs', 'cursor', 'count'],
  'prune-run-index': ['base', 'status', 'wait', '...runIds'],
  signal: ['base', 'runId', 'name', 'payload', 'now', 'max'],
  'wait-signal': ['base', 'runId', 'token', 'field', 'seq', 'attempt', 'name', 'deadline', 'now'],
  'wait-event': ['base', 'runId', 'token', 'field', 'seq', 'attempt', 'event', 'deadline', 'now', 'matchShape', 'matchHash', 'matchJson'],
  'wait-any': ['base', 'runId', 'token', 'field', 'now', 'raceRecord', 'raceBranches'],
  'register-cancel-on': ['base', 'runId', 'token', '...triggers'],
  presence: ['base', 'now', 'expiry', 'workerId', 'info', '...versions'],
} as const satisfies Record<ScriptName, readonly string[]>;

/** One ARGV value, as ioredis sends it. */
export type ScriptArg = string | number;

type Declared<N extends ScriptName> = (typeof SCRIPT_ARGS)[N][number];
type Fixed<S> = S extends `...${string}` ? never : S;
type Rest<S> = S extends `...${infer R}` ? R : never;

/** The arguments of script `N` by name: a value per declared name, a list for its `...rest`. */
export type ScriptArgs<N extends ScriptName> = { readonly [K in Fixed<Declared<N>>]: ScriptArg } & {
  readonly [K in Rest<Declared<N>>]: readonly ScriptArg[];
};

type Builder = (args: Readonly<Record<string, unknown>>) => ScriptArg[];

/** The ARGV builder of a declaration: its names resolved once, so a call only copies values. */
function builder(script: string, names: readonly string[]): Builder {
  const fixed = names.filter((name) => !name.startsWith('...'));
  const rest = names.length > fixed.length ? names[names.length - 1] : undefined;
  if (rest !== undefined && !rest.startsWith('...')) {
    throw new Error(`Script "${script}" declares a "..." argument before its last one: only the last may take the rest.`);
  }
  const restName = rest?.slice(3);
  return (args) => {
    const argv: ScriptArg[] = new Array<ScriptArg>(fixed.length);
    for (let i = 0; i < fixed.length; i++) argv[i] = args[fixed[i]] as ScriptArg;
    if (restName !== undefined) for (const value of args[restName] as readonly ScriptArg[]) argv.push(value);
    return argv;
  };
}

const builders = Object.fromEntries(Object.entries(SCRIPT_ARGS).map(([name, names]) => [name, builder(name, names)])) as Record<ScriptName, Builder>;

/** The ARGV of a call of script `name`, in its declared order (`SCRIPT_ARGS`). */
export function scriptArgv<N extends ScriptName>(name: N, args: ScriptArgs<N>): ScriptArg[] {
  return builders[name](args as Readonly<Record<string, unknown>>);
}
