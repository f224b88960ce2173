import { Cluster, ReplyError } from 'ioredis';

import type { RedflowLogger } from '../definition/logger';
import { isWriteRefusedReply, RedisUnavailableError, RedisWriteRefusedError } from '../errors';
import type { RedisConnection } from './connection';

/** Why Redis cannot take our writes right now. */
export type OutageKind = 'unreachable' | 'write-refused';

/** At most one "still down" line per this many ms while an outage goes on. */
const REPEAT_LOG_MS = 30_000;
/** An outage is over, for the log, once Redis has stayed up this long. */
const QUIET_MS = 2_000;
/** Longest pause between two probes of a Redis that is down. */
const MAX_PROBE_DELAY_MS = 5_000;

const CONNECTION_ERROR_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGE =
  /Connection is closed|Stream isn't writeable|Command timed out|refresh slots cache|None of startup nodes|^(LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN)\b/;

/** The kind of outage an error of a Redis call shows, or undefined for any other error. */
export function outageKind(error: unknown): OutageKind | undefined {
  if (error instanceof RedisWriteRefusedError) return 'write-refused';
  if (error instanceof RedisUnavailableError) return 'unreachable';
  // Duck-typed, not `instanceof Error`: a socket error made in another realm (a VM context, as in
  // Jest) is an Error all the same.
  if (typeof error !== 'object' || error === null || typeof (error as Error).message !== 'string') return undefined;
  const { message, name, code } = error as Error & { code?: unknown };
  if (error instanceof ReplyError) {
    if (isWriteRefusedReply(message)) return 'write-refused';
    return UNAVAILABLE_MESSAGE.test(message) ? 'unreachable' : undefined;
  }
  if (typeof code === 'string' && CONNECTION_ERROR_CODES.has(code)) return 'unreachable';
  if (name === 'MaxRetriesPerRequestError' || name === 'ClusterAllFailedError') return 'unreachable';
  return UNAVAILABLE_MESSAGE.test(message) ? 'unreachable' : undefined;
}

/** "host:port" of a connection (the first startup node of a cluster), never with its password. */
export function redisAddress(redis: RedisConnection): string {
  if (redis instanceof Cluster) {
    const node = (redis as unknown as { startupNodes: unknown[] }).startupNodes[0] as { host?: string; port?: number } | string | number | undefined;
    if (typeof node === 'object' && node) return `${node.host ?? '127.0.0.1'}:${node.port ?? 6379} (cluster)`;
    return `${String(node ?? 'unknown')} (cluster)`;
  }
  const { host, port, path } = redis.options;
  return path ? path : `${host ?? '127.0.0.1'}:${port ?? 6379}`;
}

/** Writes the probe key (expires in a minute): succeeds only while Redis accepts writes. */
export function writeProbe(redis: RedisConnection, key: string): Promise<unknown> {
  return redis.set(key, String(Date.now()), 'PX', 60_000);
}

/** Resolves `promise`, or rejects with `RedisUnavailableError` once `timeoutMs` passed. */
export function withTimeout<T>(promise: Promise<T>, timeoutMs: number, address: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new RedisUnavailableError(address, `no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

/**
 * The state of one Redis as seen by a client and its worker: up, unreachable, or refusing
 * writes (full, a replica, or unable to persist). It logs one line when an outage starts, at
 * most one every 30 s while it lasts, and one when it ends, with its length; connection errors
 * of every connection the library opened land here too, so stderr never fills with them. While
 * Redis is down, a probe write runs with backoff (up to 5 s) and `whenHealthy()` waiters resume
 * when it succeeds.
 */
export class RedisHealth {
  private outage: { kind: OutageKind; since: number; loggedAt: number } | undefined;
  /** The outage as logged: from its first failure until Redis stayed up for QUIET_MS. */
  private episode: { kind: OutageKind; since: number; loggedAt: number } | undefined;
  private episodeTimer: NodeJS.Timeout | undefined;
  /** Backoff of the probe; it starts again from 100 ms only once an episode is over. */
  private probeDelay = 100;
  /** When Redis last came back after an outage (0: never down). */
  recoveredAt = 0;
  private waiters: Array<() => void> = [];
  /** Called when an unreachable outage begins (see `onUnreachable`). */
  private readonly unreachableListeners = new Set<() => void>();
  private probing = false;
  private closed = false;
  private probeTimer: NodeJS.Timeout | undefined;

  constructor(
    readonly address: string,
    private readonly logger: RedflowLogger,
    /** A write that fails while Redis is down or refuses writes. */
    private readonly probe: () => Promise<unknown>,
  ) {}

  /** True unless an outage is going on. */
  get healthy(): boolean {
    return this.outage === undefined;
  }

  /** The kind of the outage going on, if any. */
  get state(): OutageKind | undefined {
    return this.outage?.kind;
  }

  /**
   * Reports a failed Redis call. Returns true when the error shows an outage: it is then
   * logged here (de-duplicated) and the caller should wait for `whenHealthy()` and retry.
   */
  report(error: unknown): boolean {
    const kind = outageKind(error);
    if (!kind) return false;
    // Redis's own reply, not our sentence around it: the log line adds its own advice.
    const detail =
      error instanceof RedisWriteRefusedError
        ? `${error.reply}, in script "${error.script}"`
        : error instanceof RedisUnavailableError
          ? error.detail
          : (error as Error).message;
    this.down(kind, detail);
    return true;
  }

  /** Watches a connection the library opened: its errors are routed here instead of stderr. */
  watch(connection: RedisConnection): void {
    connection.on('error', (error: Error) => {
      if (!this.report(error)) this.logOnce(`Redis connection error at ${this.address}: ${error.message}`);
    });
    connection.on('ready', () => {
      if (this.outage?.kind === 'unreachable') this.up();
    });
  }

  /**
   * Calls `listener` when an outage of kind 'unreachable' begins (a connection error); returns the
   * function that removes it. For calls in flight that should not wait for their timeout.
   */
  onUnreachable(listener: () => void): () => void {
    this.unreachableListeners.add(listener);
    return () => this.unreachableListeners.delete(listener);
  }

  /** Resolves when Redis is healthy again (at once when it is), or when `stopped()` says so. */
  whenHealthy(stopped: () => boolean = () => false): Promise<void> {
    if (!this.outage || this.closed || stopped()) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const check = () => {
        if (!this.outage || this.closed || stopped()) resolve();
        else this.waiters.push(check);
      };
      this.waiters.push(check);
    });
  }

  /** Wakes waiters so they can re-check their own stop condition (a worker stopping). */
  nudge(): void {
    this.wake();
  }

  /** Stops probing and releases every waiter. */
  close(): void {
    this.closed = true;
    clearTimeout(this.probeTimer);
    clearTimeout(this.episodeTimer);
    this.wake();
  }

  private lastOther: string | undefined;
  private logOnce(message: string): void {
    if (message === this.lastOther) return;
    this.lastOther = message;
    this.logger.warn(message);
  }

  /**
   * An outage starts. Redis near its memory limit flaps (small writes pass, larger ones do not),
   * so an outage that starts again within QUIET_MS of the last one ending continues the same
   * episode: it is not logged again.
   */
  private down(kind: OutageKind, detail: string): void {
    const now = Date.now();
    const firstLine = detail.split('\n')[0].slice(0, 300);
    clearTimeout(this.episodeTimer);
    const episode = this.episode;
    if (!this.outage) this.outage = { kind, since: episode?.since ?? now, loggedAt: episode?.loggedAt ?? now };
    if (kind === 'unreachable') for (const listener of [...this.unreachableListeners]) listener();
    if (!episode || episode.kind !== kind) {
      this.episode = { kind, since: episode?.since ?? now, loggedAt: now };
      this.outage.kind = kind;
      this.logger.warn(
        kind === 'write-refused'
          ? `Redis at ${this.address} refuses writes (${firstLine}). Workers stop claiming runs and retry every few seconds; free memory or raise maxmemory (OOM), connect to the primary (READONLY) or fix the disk Redis persists to (MISCONF).`
          : `Redis at ${this.address} is unreachable (${firstLine}). Workers wait and retry every few seconds; client calls reject with RedisUnavailableError. Check that Redis is running and reachable.`,
      );
    } else if (now - episode.loggedAt >= REPEAT_LOG_MS) {
      episode.loggedAt = now;
      const what = kind === 'write-refused' ? 'still refuses writes' : 'is still unreachable';
      this.logger.warn(`Redis at ${this.address} ${what} after ${seconds(now - episode.since)} (${firstLine}).`);
    }
    this.startProbing();
  }

  /** Redis answers writes again: waiters resume now; the episode is logged as over once it stays up. */
  private up(): void {
    if (!this.outage) return;
    this.outage = undefined;
    this.lastOther = undefined;
    this.recoveredAt = Date.now();
    this.wake();
    const episode = this.episode;
    if (!episode) return;
    const endedAt = Date.now();
    clearTimeout(this.episodeTimer);
    this.episodeTimer = setTimeout(() => {
      this.episode = undefined;
      this.probeDelay = 100;
      const what = episode.kind === 'write-refused' ? 'accepts writes again' : 'is reachable again';
      this.logger.warn(`Redis at ${this.address} ${what} after ${seconds(endedAt - episode.since)}; workers resume.`);
    }, QUIET_MS);
    this.episodeTimer.unref?.();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  private startProbing(): void {
    if (this.probing || this.closed) return;
    this.probing = true;
    const attempt = () => {
      const delay = this.probeDelay;
      this.probeTimer = setTimeout(async () => {
        if (this.closed || !this.outage) {
          this.probing = false;
          return;
        }
        try {
          await this.probe();
          this.probing = false;
          this.up();
        } catch (error) {
          this.report(error);
          this.probeDelay = Math.min(MAX_PROBE_DELAY_MS, this.probeDelay * 2);
          attempt();
        }
      }, delay);
      this.probeTimer.unref?.();
    };
    attempt();
  }
}
