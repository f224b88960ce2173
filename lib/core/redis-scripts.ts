import type { Cluster, Redis } from 'ioredis';
import { RedflowKeys } from './keys';
import { SCRIPTS, commandName, loadScript, type ScriptName } from './scripts/script-loader';

/** A Redis connection: standalone or Cluster. */
export type RedisConnection = Redis | Cluster;

type ScriptCommand = (...args: (string | number)[]) => Promise<unknown>;

/** A claimed run: its id, the lease token it was claimed with, and its whole hash. */
export interface ClaimedRun {
  runId: string;
  token: string;
  hash: Record<string, string>;
}

/** Result of ending an attempt. */
export interface FinishResult {
  code: 'ok' | 'canceled' | 'lost';
  next: ClaimedRun | null;
}

export type FinishOutcome = 'succeeded' | 'failed' | 'retry';

const loadedSources = new Map<ScriptName, string>();
function source(name: ScriptName): string {
  let text = loadedSources.get(name);
  if (!text) {
    text = loadScript(name);
    loadedSources.set(name, text);
  }
  return text;
}

function toHash(flat: string[]): Record<string, string> {
  const hash: Record<string, string> = {};
  for (let i = 0; i < flat.length; i += 2) hash[flat[i]] = flat[i + 1];
  return hash;
}

function toClaimed(reply: unknown[] | null | undefined, offset: number, token: string): ClaimedRun | null {
  if (!reply || reply[offset] == null) return null;
  return { runId: String(reply[offset]), token, hash: toHash(reply[offset + 1] as string[]) };
}

/**
 * The only place that calls the Lua scripts: it registers them once per connection and builds
 * every KEYS/ARGV array, so script contracts live in one file next to the scripts' headers.
 */
export class RedisScripts {
  private readonly commands = {} as Record<ScriptName, ScriptCommand>;

  constructor(
    readonly redis: RedisConnection,
    readonly keys: RedflowKeys,
  ) {
    const target = redis as unknown as Record<string, ScriptCommand>;
    for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
      const cmd = commandName(name);
      if (typeof target[cmd] !== 'function') {
        redis.defineCommand(cmd, { numberOfKeys: SCRIPTS[name], lua: source(name) });
      }
      this.commands[name] = target[cmd].bind(redis);
    }
  }

  async enqueue(a: {
    runId: string;
    workflow: string;
    queue: string;
    maxAttempts: string;
    input: string;
    now: number;
    runAt: number;
    idempotencyKey: string;
    idempotencyTtlSec: number;
  }): Promise<{ kind: 'created' | 'existing' | 'conflict' | 'unknown'; runId: string }> {
    const k = this.keys;
    const reply = (await this.commands.enqueue(
      k.run(a.runId),
      a.idempotencyKey ? k.idempotency(a.workflow, a.idempotencyKey) : k.run(a.runId),
      k.workflow(a.workflow),
      k.base,
      a.runId,
      a.workflow,
      a.queue,
      a.maxAttempts,
      a.input,
      a.now,
      a.runAt,
      a.idempotencyKey,
      a.idempotencyTtlSec,
    )) as [string, string];
    return { kind: reply[0] as 'created', runId: reply[1] };
  }

  async claim(queue: string, token: string, now: number, leaseMs: number): Promise<ClaimedRun | null> {
    const k = this.keys;
    const reply = (await this.commands.claim(k.ready(queue), k.leases(), k.base, token, now, leaseMs)) as unknown[] | null;
    return toClaimed(reply, 0, token);
  }

  async checkpoint(runId: string, token: string, leaseUntil: number, records: string[]): Promise<'ok' | 'canceled' | 'lost'> {
    return (await this.commands.checkpoint(this.keys.run(runId), this.keys.leases(), runId, token, leaseUntil, ...records)) as 'ok';
  }

  async finish(a: {
    runId: string;
    queue: string;
    token: string;
    now: number;
    outcome: FinishOutcome;
    payload: string;
    dueAt: number;
    /** Lease token for claiming the next run of the queue, or '' to claim none. */
    nextToken: string;
    leaseMs: number;
    records: string[];
  }): Promise<FinishResult> {
    const k = this.keys;
    const reply = (await this.commands.finish(
      k.run(a.runId),
      k.leases(),
      k.ready(a.queue),
      k.scheduled(a.queue),
      k.base,
      a.runId,
      a.token,
      a.now,
      a.outcome,
      a.payload,
      a.dueAt,
      a.nextToken,
      a.leaseMs,
      ...a.records,
    )) as unknown[];
    return { code: reply[0] as FinishResult['code'], next: toClaimed(reply, 1, a.nextToken) };
  }

  async cancel(runId: string, now: number, errorJson: string, reason: string): Promise<string> {
    const k = this.keys;
    return (await this.commands.cancel(k.run(runId), k.leases(), k.base, runId, now, errorJson, reason, k.cancelChannel())) as string;
  }

  async heartbeat(leaseUntil: number, leases: string[]): Promise<string[]> {
    return (await this.commands.heartbeat(this.keys.leases(), this.keys.base, leaseUntil, ...leases)) as string[];
  }

  async promote(queue: string, now: number, batch: number): Promise<{ moved: number; nextDue: number }> {
    const k = this.keys;
    const [moved, nextDue] = (await this.commands.promote(k.scheduled(queue), k.ready(queue), k.base, now, batch)) as [number, number];
    return { moved: Number(moved), nextDue: Number(nextDue) };
  }

  async reap(now: number, batch: number): Promise<string[]> {
    return (await this.commands.reap(this.keys.leases(), this.keys.base, now, batch)) as string[];
  }

  async syncRegistry(owner: string, now: number, entries: string[]): Promise<string[]> {
    return (await this.commands['sync-registry'](this.keys.workflows(), this.keys.base, owner, now, ...entries)) as string[];
  }
}
