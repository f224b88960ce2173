import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Bumped whenever a script's KEYS/ARGV contract or the key layout it keeps changes, so that two
 * copies of the library sharing one connection never run each other's scripts. 3: the
 * (workflow, status) index. 4: every call ends its ARGV with the event stream's MAXLEN. 5: a script's events share
 * one stream entry. 6: the `terminated` status (cleanup and prune take its index), `crashes`.
 */
export const SCRIPT_VERSION = 6;

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
  const visiting = new Set<string>();
  const include = (file: string, from: string) => {
    if (done.has(file)) return;
    if (visiting.has(file)) throw new Error(`Lua include cycle: ${from} includes ${file}, which includes it back.`);
    visiting.add(file);
    const text = readFileSync(join(__dirname, 'includes', file), 'utf8');
    for (const [, dep] of text.matchAll(INCLUDE)) include(dep, file);
    visiting.delete(file);
    done.add(file);
    parts.push(text.replace(INCLUDE, ''));
  };
  const file = scriptFile(name);
  include(PROLOGUE_INCLUDE, file);
  const source = readFileSync(join(__dirname, file), 'utf8');
  for (const [, dep] of source.matchAll(INCLUDE)) include(dep, file);
  const body = source.replace(INCLUDE, '');
  // A script that writes events buffers them (run-events.lua) and writes them with one XADD at
  // its end: its body runs as a function, then the buffer is flushed, then its reply is returned.
  parts.push(done.has(EVENTS_INCLUDE) ? `local redflow_reply = (function()\n${body}\nend)()\nflush_events()\nreturn redflow_reply` : body);
  return parts.join('\n');
}

/** The versioned command name a script is registered under with ioredis `defineCommand`. */
export function commandName(name: ScriptName): string {
  return `redflow_v${SCRIPT_VERSION}_${name.replace(/-/g, '_')}`;
}
