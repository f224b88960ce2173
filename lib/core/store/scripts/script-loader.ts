import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Bumped whenever a script's KEYS/ARGV contract or the key layout it keeps changes, so that two
 * copies of the library sharing one connection never run each other's scripts. 3: the
 * (workflow, status) index. 4: every call ends its ARGV with the event stream's MAXLEN. 5: a script's events share
 * one stream entry. 6: the `terminated` status (cleanup and prune take its index), `crashes`. 7: a Redis
 * Functions library; status indexes for ended statuses only, no `wf:<name>:runs`, `wfnames`. 8: `presence`
 * takes the worker's info and keeps the `workers` hash; a scheduled run's `wait` field and the `waiting:` indexes,
 * `prune-run-index` takes a wait; wait records end with when the wait began, tries records with the tries, the record of a finished wait with what it
 * waited for. 9: a ready list holds marks besides run ids (a concurrency key's place, the priority mark), with
 * the `groups` hash, `grp:` lists, the priority zsets; a run's `slot` field may be 'g' or '1g'.
 */
export const SCRIPT_VERSION = 9;

/**
 * Scripts that must run on a Redis over `maxmemory`: they only delete (retention, prune, index
 * pruning) or keep leases alive without growing memory (heartbeat). As Redis Functions they carry
 * the `allow-oom` flag; every other function is refused by Redis before it runs when memory is
 * full (and every function, these included, on a read-only replica or when Redis cannot persist).
 */
export const ALLOW_OOM: ReadonlySet<ScriptName> = new Set<ScriptName>(['cleanup', 'prune', 'prune-run-index', 'heartbeat']);

/**
 * Put first in every script: it takes the event stream's MAXLEN (0 = off) off the end of ARGV,
 * where `RedisScripts` appends it to every call, so no script's own ARGV contract changes.
 */
export const PROLOGUE_INCLUDE = 'events-max-len.lua';

/** The include that buffers a script's events; the loader appends its `flush_events()` call. */
const EVENTS_INCLUDE = 'run-events.lua';

/** Every state-transition script and its number of KEYS. */
export const SCRIPTS = {
  enqueue: 3,
  'enqueue-many': 1,
  claim: 2,
  checkpoint: 2,
  finish: 4,
  cancel: 2,
  terminate: 2,
  'delete-run': 2,
  resume: 1,
  heartbeat: 1,
  promote: 2,
  reap: 1,
  'start-child': 1,
  'emit-event': 1,
  'fire-events': 1,
  'cron-fire': 1,
  'cron-pause': 1,
  'queue-pause': 1,
  'rotate-payload': 1,
  schedule: 2,
  unschedule: 2,
  cleanup: 4,
  prune: 4,
  'sync-registry': 3,
  'backfill-run-index': 2,
  'prune-run-index': 1,
  signal: 2,
  'wait-signal': 2,
  'wait-event': 1,
  'wait-any': 2,
  'register-cancel-on': 1,
  presence: 1,
} as const;

export type ScriptName = keyof typeof SCRIPTS;

const INCLUDE = /^--!include ([\w.-]+)\s*$/gm;

/** The file of a script: `<name>-<number of KEYS>.lua`, as BullMQ names its scripts. */
export function scriptFile(name: ScriptName): string {
  return `${name}-${SCRIPTS[name]}.lua`;
}

/**
 * Reads a script and puts the shared functions it needs before it: each `--!include x.lua` line
 * (in the script or, recursively, in an include) names a file of `includes/`, inlined once, after
 * the includes it names itself. So a script carries only the functions it uses, each defined once.
 * `PROLOGUE_INCLUDE` comes first in every script, and a script that includes `EVENTS_INCLUDE`
 * ends by writing its buffered events.
 */
export function loadScript(name: ScriptName): string {
  const parts: string[] = [];
  const done = new Set<string>();
  includeFile(PROLOGUE_INCLUDE, scriptFile(name), parts, done);
  const body = scriptBody(name, parts, done);
  // A script that writes events buffers them (run-events.lua) and writes them with one XADD at
  // its end: its body runs as a function, then the buffer is flushed, then its reply is returned.
  parts.push(done.has(EVENTS_INCLUDE) ? `local redflow_reply = (function()\n${body}\nend)()\nflush_events()\nreturn redflow_reply` : body);
  return parts.join('\n');
}

/** Appends `file` of `includes/` to `parts`, after the includes it names itself, once per `done`. */
function includeFile(file: string, from: string, parts: string[], done: Set<string>, visiting = new Set<string>()): void {
  if (done.has(file)) return;
  if (visiting.has(file)) throw new Error(`Lua include cycle: ${from} includes ${file}, which includes it back.`);
  visiting.add(file);
  const text = readFileSync(join(__dirname, 'includes', file), 'utf8');
  for (const [, dep] of text.matchAll(INCLUDE)) includeFile(dep, file, parts, done, visiting);
  visiting.delete(file);
  done.add(file);
  parts.push(text.replace(INCLUDE, ''));
}

/** A script's own text without its include lines; the includes it names are appended to `parts` first. */
function scriptBody(name: ScriptName, parts: string[], done: Set<string>): string {
  const file = scriptFile(name);
  const source = readFileSync(join(__dirname, file), 'utf8');
  for (const [, dep] of source.matchAll(INCLUDE)) includeFile(dep, file, parts, done);
  return source.replace(INCLUDE, '');
}

const ARGV_LINE = /^-- ARGV: (.+)$/gm;

/**
 * A script's ARGV names, in order, as its header declares them: `-- ARGV: base runId now
 * ...records` (a long list goes on over more `-- ARGV:` lines), a last name starting with `...`
 * taking the rest of ARGV. The caller's twin is
 * `SCRIPT_ARGS` (`store/script-args.ts`), from which every call builds its ARGV;
 * `test/unit/script-args.spec.ts` checks that the two agree. The event stream's MAXLEN, which
 * `RedisScripts` appends to every call, is not declared: the prologue takes it off first.
 */
export function scriptArgs(name: ScriptName): string[] {
  const lines = [...readFileSync(join(__dirname, scriptFile(name)), 'utf8').matchAll(ARGV_LINE)];
  if (!lines.length) throw new Error(`${scriptFile(name)} declares no ARGV: add a "-- ARGV: name ..." line to its header.`);
  return lines.flatMap((line) => line[1].trim().split(/\s+/));
}

/** Every script as one Redis Functions library (`FUNCTION LOAD`). */
export interface ScriptLibrary {
  /** `redflow_<hash of the code>`: two builds with different scripts never share a name. */
  name: string;
  code: string;
  /** The function name of each script. */
  functions: Record<ScriptName, string>;
}

let library: ScriptLibrary | undefined;

/**
 * Every script in one Redis Functions library (Redis 7.0 and later). The shared functions of
 * `includes/` are defined once, when the library loads, instead of on every call as in a script
 * sent with EVALSHA: that setup is most of what a small script costs Redis. Each script's body
 * becomes a function of the library called through a wrapper that sets KEYS and ARGV, takes the
 * event stream's MAXLEN off ARGV (as the prologue does for EVAL), starts an empty event buffer
 * and writes it at the end. Only the wrapper runs per call.
 */
export function loadLibrary(): ScriptLibrary {
  if (library) return library;
  const names = Object.keys(SCRIPTS) as ScriptName[];
  const parts: string[] = [];
  const done = new Set<string>([PROLOGUE_INCLUDE]);
  includeFile(EVENTS_INCLUDE, 'the library', parts, done);
  includeFile('writable.lua', 'the library', parts, done);
  const bodies = names.map((name) => `local function body_${luaName(name)}()\n${scriptBody(name, parts, done)}\nend`);
  const shared = parts.join('\n') + '\n' + bodies.join('\n');
  const hash = createHash('sha1').update(`${SCRIPT_VERSION}\n${shared}`).digest('hex').slice(0, 16);
  const name = `redflow_${hash}`;
  const functions = Object.fromEntries(names.map((n) => [n, `${name}_${luaName(n)}`])) as Record<ScriptName, string>;
  const registrations = names.map(
    (n) =>
      `redis.register_function{ function_name = '${functions[n]}', callback = redflow_call(body_${luaName(n)}), flags = { ${ALLOW_OOM.has(n) ? "'allow-oom'" : ''} } }`,
  );
  const code = [
    `#!lua name=${name}`,
    '-- KEYS and ARGV of the current call, set by redflow_call: the scripts and includes read them as in EVAL.',
    'local KEYS, ARGV = {}, {}',
    '-- The event stream MAXLEN of the current call (events-max-len.lua takes it off ARGV in EVAL).',
    "local EVENTS_MAX_LEN, EVENTS_MAX_LEN_ARG = 0, '0'",
    '-- Functions are refused before they run when Redis cannot take writes: no write-check needed.',
    'local REFUSED_BEFORE_RUN = true',
    shared,
    'local function redflow_call(body)',
    '  return function(keys, args)',
    '    KEYS, ARGV = keys, args',
    '    EVENTS_MAX_LEN_ARG = table.remove(ARGV)',
    '    EVENTS_MAX_LEN = tonumber(EVENTS_MAX_LEN_ARG) or 0',
    '    reset_events()',
    '    local reply = body()',
    '    flush_events()',
    '    return reply',
    '  end',
    'end',
    ...registrations,
  ].join('\n');
  library = { name, code, functions };
  return library;
}

function luaName(name: ScriptName): string {
  return name.replace(/-/g, '_');
}

/** The versioned command name a script is registered under with ioredis `defineCommand`. */
export function commandName(name: ScriptName): string {
  return `redflow_v${SCRIPT_VERSION}_${name.replace(/-/g, '_')}`;
}
