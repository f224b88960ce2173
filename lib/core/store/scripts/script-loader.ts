import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Bumped whenever a script's KEYS/ARGV contract or the key layout it keeps changes, so that two
 * copies of the library sharing one connection never run each other's scripts. 3: the
 * (workflow, status) index.
 */
export const SCRIPT_VERSION = 3;

/** Every state-transition script and its number of KEYS. */
export const SCRIPTS = {
  enqueue: 3,
  claim: 2,
  checkpoint: 2,
  finish: 4,
  cancel: 2,
  heartbeat: 1,
  promote: 2,
  reap: 1,
  'start-child': 1,
  'emit-event': 1,
  'fire-events': 1,
  'cron-fire': 1,
  cleanup: 3,
  'sync-registry': 3,
  'backfill-run-index': 2,
  'prune-run-index': 1,
} as const;

export type ScriptName = keyof typeof SCRIPTS;

const INCLUDE = /^--!include ([\w.-]+)\s*$/gm;

/** Reads a script file and inlines its `--!include fragment.lua` lines (fragments may not include). */
export function loadScript(name: string): string {
  const source = readFileSync(join(__dirname, `${name}.lua`), 'utf8');
  return source.replace(INCLUDE, (_line, fragment: string) => readFileSync(join(__dirname, fragment), 'utf8'));
}

/** The versioned command name a script is registered under with ioredis `defineCommand`. */
export function commandName(name: ScriptName): string {
  return `redflow_v${SCRIPT_VERSION}_${name.replace(/-/g, '_')}`;
}
