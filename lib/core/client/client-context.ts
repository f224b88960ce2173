import { randomBytes } from 'node:crypto';

import { systemClock, type Clock } from '../definition/clock';
import type { Duration } from '../definition/duration-format';
import { stderrLogger, type RedflowLogger } from '../definition/logger';
import { assertKnownKeys, checkInteger, checkResourceName, optionKeys, renamedDuration } from '../definition/option-checks';
import { checkCodecOption, type PayloadCodec } from '../definition/payload-codec';
import { checkEventStreamOption, type EventStreamOptions } from '../definition/run-events';
import { checkTracingOption, GuardedTracing, type RedflowTracing } from '../definition/tracing';
import { getDefaultRegistry, type WorkflowRegistry } from '../definition/workflow';
import { ConfigurationError, RedisUnavailableError } from '../errors';
import { closeConnection, type ConnectionOptions } from '../store/connection';
import { RedflowKeys } from '../store/keys';
import { Payloads } from '../store/payloads';
import { masterNodes } from '../store/prefix-scan';
import { outageKind, redisAddress, RedisHealth, withTimeout, writeProbe } from '../store/redis-health';
import { RedisScripts, type RedisConnection } from '../store/redis-scripts';
import { RegistryQueries } from '../store/registry-queries';
import { RunBrowseQueries } from '../store/run-browse-queries';
import { RunListQueries } from '../store/run-list-queries';
import { RunQueries } from '../store/run-queries';
import { DEFAULT_MAX_PAYLOAD_BYTES } from '../store/serialization';

/** Options of `createClient`. */
export interface ClientOptions extends ConnectionOptions {
  /** Namespace of every key; all keys of a prefix share one Redis Cluster slot. @default process.env.REDFLOW_PREFIX ?? "redflow" */
  prefix?: string;
  /** Workflows known to this process: their schemas validate input on enqueue. @default the default registry */
  registry?: WorkflowRegistry;
  /** Largest input or step output in bytes. @default 1048576 (1 MiB) */
  maxPayloadBytes?: number;
  /**
   * How long a call waits for Redis before it rejects with `RedisUnavailableError`. A call that
   * timed out may still be applied when Redis comes back. @default '10s'
   */
  commandTimeout?: Duration;
  /** @deprecated Use `commandTimeout` (a duration such as `'10s'`, or ms); it goes in the next minor version. */
  commandTimeoutMs?: number;
  /**
   * Fail (ConfigurationError) instead of warning when Redis's `maxmemory-policy`, read on the
   * first connection, is not `noeviction`: any other policy lets Redis delete runs when it fills
   * up. In Nest: `redis: { requireNoEviction: true }`. @default false
   */
  requireNoEviction?: boolean;
  /** Where warnings go (Redis outages, eviction policy). @default warnings and errors to stderr */
  logger?: RedflowLogger;
  /**
   * The source of workflow time (due times of `runAt`, `delay`, waits, schedules); a worker on this
   * client uses it too. Tests pass a `VirtualClock` from `nestjs-redflow/testing`. Leases always
   * use real time. @default systemClock
   */
  clock?: Clock;
  /**
   * The event stream `{prefix}:events` that `client.events()` reads, written by the scripts this
   * client and its workers run: about the last `maxLen` events of the prefix are kept. `false`
   * writes nothing. Give every process of a prefix the same value. @default { maxLen: 100000 }
   */
  events?: EventStreamOptions | false;
  /**
   * Tracing, such as `redflowTracing()` from `nestjs-redflow/otel`: the trace context active where
   * a run is started is stored with it, and a worker on this client opens spans for its attempts
   * and steps as children of it. What the tracer throws is logged and dropped. @default none
   */
  tracing?: RedflowTracing;
  /**
   * Encodes every payload stored in Redis (inputs, outputs, step records, signal and event
   * payloads, progress, `setEvent` values), such as `aesGcmCodec({ keys, current })`; ids, names,
   * statuses, times and errors stay readable. Give every process of a prefix the same codec (and
   * keys): a client without it cannot read encoded payloads. A worker on this client uses it.
   * @default none: payloads are stored as plain JSON
   */
  codec?: PayloadCodec;
}

/**
 * @internal A client option (a symbol: not among the public keys) of the CLI and the standalone
 * dashboard, which show runs rather than compute with them: a payload they cannot decode (no
 * codec, or not its key) reads as an `EncryptedPayload` instead of throwing.
 */
export const DISPLAY_PAYLOADS = Symbol.for('nestjs-redflow.displayPayloads');

/** Keys of `ClientOptions` (`createClient`). */
export const CLIENT_OPTION_KEYS = optionKeys<ClientOptions>()([
  'redis',
  'url',
  'prefix',
  'registry',
  'maxPayloadBytes',
  'commandTimeout',
  'commandTimeoutMs',
  'requireNoEviction',
  'logger',
  'clock',
  'events',
  'tracing',
  'codec',
]);

/** Default of `commandTimeoutMs`. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 10_000;

/** A new run id: time-ordered, unique across processes. */
export function newRunId(): string {
  return `${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
}

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A node's maxmemory-policy: CONFIG GET, or INFO memory where CONFIG is forbidden (managed Redis, ACL users). */
async function readEvictionPolicy(node: RedisConnection): Promise<string | undefined> {
  try {
    const reply = (await node.config('GET', 'maxmemory-policy')) as unknown;
    const flat = Array.isArray(reply) ? reply.map(String) : Object.entries(reply as Record<string, string>).flat();
    const i = flat.indexOf('maxmemory-policy');
    if (i >= 0 && flat[i + 1]) return flat[i + 1];
  } catch (error) {
    if (outageKind(error)) throw error;
  }
  try {
    const info = await node.info('memory');
    return /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
  } catch (error) {
    if (outageKind(error)) throw error;
    return undefined;
  }
}

/** Ids are never empty, and hold no control characters: anything else cannot be a run. */
export function isPossibleRunId(id: unknown): id is string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 2048) return false;
  for (let i = 0; i < id.length; i++) if (id.charCodeAt(i) < 0x20 || id.charCodeAt(i) === 0x7f) return false;
  return true;
}

/**
 * What every part of the client shares: the connection, keys, scripts, store queries and limits,
 * the first-call eviction-policy check, and `call`, which runs one request within
 * `commandTimeoutMs` and turns connection failures into `RedisUnavailableError`.
 */
export class ClientContext {
  readonly keys: RedflowKeys;
  readonly scripts: RedisScripts;
  /** Reads of one run: the run, its steps, children, end and published values. */
  readonly runQueries: RunQueries;
  /** Reads of the run indexes: pages, counts, the overview, the index backfill. */
  readonly listQueries: RunListQueries;
  /** Reads of the registry, versions, crons and queue depths. */
  readonly registryQueries: RegistryQueries;
  /** Reads for browsing runs (the dashboard): pages in either order, time ranges, queues, idempotency keys. */
  readonly browseQueries: RunBrowseQueries;
  readonly registry: WorkflowRegistry;
  readonly maxPayloadBytes: number;
  /** How payloads are stored: sealed and opened with the `codec` option (plain JSON without one). */
  readonly payloads: Payloads;
  readonly commandTimeoutMs: number;
  readonly health: RedisHealth;
  readonly logger: RedflowLogger;
  readonly clock: Clock;
  readonly eventsMaxLen: number;
  /** The `tracing` option, guarded; undefined when tracing is off. */
  readonly tracing: GuardedTracing | undefined;
  private readonly requireNoEviction: boolean;
  private checked: Promise<void> | undefined;
  private closed = false;

  constructor(
    readonly redis: RedisConnection,
    private readonly ownsConnection: boolean,
    options: ClientOptions,
  ) {
    assertKnownKeys('createClient options', options, CLIENT_OPTION_KEYS);
    this.keys = new RedflowKeys(checkResourceName(options.prefix ?? process.env.REDFLOW_PREFIX ?? 'redflow', 'prefix (or REDFLOW_PREFIX)'));
    this.eventsMaxLen = checkEventStreamOption(options.events);
    this.scripts = new RedisScripts(redis, this.keys, this.eventsMaxLen);
    const payloads = new Payloads(checkCodecOption(options.codec, 'createClient option'));
    this.payloads = (options as { [DISPLAY_PAYLOADS]?: boolean })[DISPLAY_PAYLOADS] ? payloads.forDisplay() : payloads;
    this.runQueries = new RunQueries(redis, this.keys, this.payloads);
    this.listQueries = new RunListQueries(redis, this.keys, this.scripts, this.runQueries);
    this.registryQueries = new RegistryQueries(redis, this.keys, (workflow, version) => this.listQueries.hasUnfinishedRuns(workflow, version));
    this.browseQueries = new RunBrowseQueries(redis, this.keys);
    this.registry = options.registry ?? getDefaultRegistry();
    this.maxPayloadBytes = checkInteger(options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, 'maxPayloadBytes', 1, 512 * 1024 * 1024);
    this.commandTimeoutMs =
      renamedDuration(options, { name: 'commandTimeout', deprecated: 'commandTimeoutMs', label: (key) => `client option ${key}`, timer: true }) ??
      DEFAULT_COMMAND_TIMEOUT_MS;
    this.requireNoEviction = options.requireNoEviction ?? false;
    this.logger = options.logger ?? stderrLogger;
    this.clock = options.clock ?? systemClock;
    const tracing = checkTracingOption(options.tracing, 'createClient option');
    this.tracing = tracing && new GuardedTracing(tracing, this.logger);
    this.health = new RedisHealth(redisAddress(redis), this.logger, () => writeProbe(this.redis, this.keys.probe()));
    if (ownsConnection) this.health.watch(redis);
  }

  /**
   * Checks Redis once per client, before its first call: warns (or, with
   * `redis.requireNoEviction`, throws ConfigurationError) when its `maxmemory-policy` lets it
   * delete keys.
   */
  ready(): Promise<void> {
    this.checked ??= withTimeout(this.checkEvictionPolicy(), this.commandTimeoutMs, this.health.address).catch((error: unknown) => {
      // A Redis that was down is checked again on the next call; a refused policy stays refused.
      if (!(error instanceof ConfigurationError)) this.checked = undefined;
      throw this.unavailable(error);
    });
    return this.checked;
  }

  private async checkEvictionPolicy(): Promise<void> {
    const nodes = await masterNodes(this.redis, this.keys);
    for (const node of nodes) {
      const policy = await readEvictionPolicy(node);
      const where = `Redis at ${redisAddress(node)}`;
      if (policy === undefined) {
        this.logger.warn(
          `${where} did not tell its maxmemory-policy (CONFIG GET and INFO memory were refused); make sure it is noeviction, or Redis may delete runs when it fills up.`,
        );
        continue;
      }
      if (policy === 'noeviction') continue;
      const message = `${where} has maxmemory-policy "${policy}": when it fills up it deletes keys, and with them workflow runs, steps and the workflow registry, without a trace. Set maxmemory-policy to noeviction (CONFIG SET maxmemory-policy noeviction, redis.conf, or your provider's parameter group).`;
      if (this.requireNoEviction) throw new ConfigurationError(`${message} requireNoEviction is on, so this client refuses to use it.`);
      this.logger.warn(`${message} Pass requireNoEviction: true (in Nest: redis: { requireNoEviction: true }) to refuse to start instead of this warning.`);
    }
  }

  /**
   * Runs one client call against Redis: after the first-connection check, within
   * `commandTimeoutMs`, with connection failures turned into `RedisUnavailableError`; at once
   * `RedisUnavailableError` while the client knows its connection is down.
   */
  async call<T>(fn: () => Promise<T>): Promise<T> {
    // Known down (its connection lost, not yet back): reject at once rather than after commandTimeoutMs.
    if (this.health.state === 'unreachable' && this.redis.status !== 'ready') {
      throw new RedisUnavailableError(this.health.address, `the connection is down (${this.redis.status}) since an outage began; it reconnects by itself`);
    }
    try {
      return await this.failFast(this.ready().then(() => withTimeout(fn(), this.commandTimeoutMs, this.health.address)));
    } catch (error) {
      throw this.unavailable(error);
    }
  }

  /**
   * `promise`, or `RedisUnavailableError` as soon as the connection is lost while it waits: a call
   * in flight does not wait out `commandTimeoutMs` once the client knows Redis is unreachable
   * (as with a timeout, a command already sent may still be applied when Redis comes back).
   */
  private failFast<T>(promise: Promise<T>): Promise<T> {
    let off: () => void = () => undefined;
    const lost = new Promise<never>((_, reject) => {
      off = this.health.onUnreachable(() => {
        if (this.redis.status !== 'ready') reject(new RedisUnavailableError(this.health.address, `the connection was lost (${this.redis.status})`));
      });
    });
    return Promise.race([promise, lost]).finally(off);
  }

  private unavailable(error: unknown): unknown {
    if (error instanceof RedisUnavailableError || outageKind(error) !== 'unreachable') return error;
    return new RedisUnavailableError(this.health.address, (error as Error).message.split('\n')[0]);
  }

  /** Closes the connection if this client opened it. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.health.close();
    if (this.ownsConnection) await closeConnection(this.redis);
  }
}
