import { Cluster, ReplyError, type Redis } from 'ioredis';

import { isWriteRefusedReply, RedisScriptError, RedisUnavailableError, RedisWriteRefusedError } from '../errors';
import type { RedisConnection } from './connection';
import type { RedflowKeys } from './keys';
import { outageKind, redisAddress } from './redis-health';
import { scriptArgv, type ScriptArg, type ScriptArgs } from './script-args';
import { commandName, loadLibrary, loadScript, SCRIPTS, type ScriptName } from './scripts/script-loader';

type ScriptCommand = (...args: ScriptArg[]) => Promise<unknown>;

const loadedSources = new Map<ScriptName, string>();
function source(name: ScriptName): string {
  let text = loadedSources.get(name);
  if (!text) {
    text = loadScript(name);
    loadedSources.set(name, text);
  }
  return text;
}

/**
 * FCALL answered without running anything: the function is not loaded there yet, or this Redis
 * (6.2, a managed service) or this user cannot run functions at all. A script's own errors never
 * read like these.
 */
function isFunctionMissing(error: unknown): boolean {
  return error instanceof Error && /^ERR Function not found|unknown command|NOPERM|not (available|supported|allowed)/i.test(error.message);
}

/** FUNCTION LOAD refused because this Redis or this user has no functions: EVALSHA instead. */
function isFunctionUnsupported(error: unknown): boolean {
  return error instanceof Error && /unknown command|unknown subcommand|NOPERM|not (available|supported|allowed)/i.test(error.message);
}

/** Deletes the `redflow_` libraries of a node other than `keep` (earlier builds' scripts). */
async function deleteOtherLibraries(node: Redis, keep: string): Promise<void> {
  const listed = (await node.call('FUNCTION', 'LIST', 'LIBRARYNAME', 'redflow_*')) as unknown[];
  const names: string[] = [];
  for (const entry of listed ?? []) {
    const fields = entry instanceof Map ? [...entry.entries()].flat() : (entry as unknown[]);
    const at = fields.indexOf('library_name');
    if (at >= 0) names.push(String(fields[at + 1]));
  }
  for (const name of names) {
    if (name.startsWith('redflow_') && name !== keep) await node.call('FUNCTION', 'DELETE', name).catch(() => undefined);
  }
}

/**
 * The error a failed script call rejects with: Redis's reply under a named class, and never the
 * script's source (ioredis attaches the EVAL arguments to its errors).
 */
function scriptFailure(script: ScriptName, error: unknown, address: string): Error {
  if (!(error instanceof Error)) return new RedisScriptError(script, String(error));
  const reply = error.message.split('\n')[0];
  if (error instanceof ReplyError) {
    if (isWriteRefusedReply(reply)) return new RedisWriteRefusedError(script, reply);
    if (outageKind(error) === 'unreachable') return new RedisUnavailableError(address, reply);
    return new RedisScriptError(script, reply);
  }
  if (outageKind(error) === 'unreachable') return new RedisUnavailableError(address, reply);
  return error;
}

/**
 * How every script is called: it registers the scripts once per connection, sends each call as a
 * function of the library (or with EVALSHA) and builds its ARGV from named arguments in the
 * order the script declares (`script-args.ts`). The classes after it (`RunScripts`,
 * `WaitScripts`, `RedisScripts`) hold one method per script, each building its KEYS.
 */
export class ScriptCaller {
  private readonly commands = {} as Record<ScriptName, ScriptCommand>;
  /**
   * How scripts are called: as functions of one Redis Functions library (FCALL; Redis 7.0 and
   * later), or with EVALSHA (Redis 6.2, or a user without the FUNCTION command). Found on the
   * first call; `REDFLOW_SCRIPT_MODE=eval` forces EVALSHA.
   */
  private mode: 'unknown' | 'function' | 'eval';
  private loading: Promise<void> | undefined;
  /** Loads finished (or failed) so far: a call that failed before the latest one ended needs no other. */
  private loads = 0;
  private loadedOnce = false;

  /**
   * @param eventsMaxLen the event stream's MAXLEN (0: off). Appended to every call's ARGV, where
   * each script's prologue (`includes/events-max-len.lua`) takes it off again.
   */
  constructor(
    readonly redis: RedisConnection,
    readonly keys: RedflowKeys,
    readonly eventsMaxLen: number = 0,
  ) {
    this.mode = process.env.REDFLOW_SCRIPT_MODE === 'eval' ? 'eval' : 'unknown';
    const library = loadLibrary();
    const target = redis as unknown as Record<string, ScriptCommand>;
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      const cmd = commandName(name);
      if (typeof target[cmd] !== 'function') {
        redis.defineCommand(cmd, { numberOfKeys: SCRIPTS[name], lua: source(name) });
      }
      const viaEval = target[cmd].bind(redis);
      const fn = library.functions[name];
      const numKeys = SCRIPTS[name];
      this.commands[name] = (...args) =>
        this.invoke(fn, numKeys, viaEval, args).catch((error: unknown) => {
          throw scriptFailure(name, error, redisAddress(redis));
        });
    }
  }

  /** Calls script `name` with its KEYS (as many as its file name says) and its arguments by name. */
  protected call<N extends ScriptName>(name: N, keys: readonly string[], args: ScriptArgs<N>): Promise<unknown> {
    const argv: ScriptArg[] = [...keys, ...scriptArgv(name, args)];
    argv.push(this.eventsMaxLen);
    return this.commands[name](...argv);
  }

  private usesEval(): boolean {
    return this.mode === 'eval';
  }

  /** Calls a script as a function of the library, loading the library when Redis lacks it (a new or restarted Redis). */
  private async invoke(fn: string, numKeys: number, viaEval: ScriptCommand, args: ScriptArg[]): Promise<unknown> {
    if (this.usesEval()) return viaEval(...args);
    const loads = this.loads;
    try {
      return await this.redis.fcall(fn, numKeys, ...args);
    } catch (error) {
      if (!isFunctionMissing(error)) throw error;
    }
    // Calls sent together before the library was there all fail: only those sent after the last
    // load finished load it again (Redis lost it since: a restart, a flush).
    if (this.loads === loads) await this.loadLibrary();
    // The load may have found a Redis without FUNCTION: the mode is then 'eval'.
    if (this.usesEval()) return viaEval(...args);
    return this.redis.fcall(fn, numKeys, ...args);
  }

  /**
   * Loads the library on every master (one FUNCTION LOAD each; one already there is kept). The
   * first load of this process also deletes other `redflow_` libraries, left by earlier builds:
   * a process still running one of them loads its own again on its next call. A Redis without
   * FUNCTION (6.2) or a user not allowed to run it switches this client to EVALSHA.
   */
  private async loadLibrary(): Promise<void> {
    this.loading ??= (async () => {
      const library = loadLibrary();
      const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
      try {
        await Promise.all(
          nodes.map(async (node) => {
            await node.call('FUNCTION', 'LOAD', library.code).catch((error: unknown) => {
              if (!/already exists/i.test((error as Error).message)) throw error;
            });
            if (!this.loadedOnce) await deleteOtherLibraries(node, library.name);
          }),
        );
        this.mode = 'function';
        this.loadedOnce = true;
      } catch (error) {
        if (!isFunctionUnsupported(error)) throw error;
        this.mode = 'eval';
      }
    })().finally(() => {
      this.loading = undefined;
      this.loads++;
    });
    await this.loading;
  }
}
