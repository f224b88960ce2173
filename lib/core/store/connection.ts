import { Cluster, Redis } from 'ioredis';

import { ConfigurationError } from '../errors';
// The public declarations name ioredis' types from ioredis-types.ts, never from 'ioredis' (see there).
import type { Cluster as ClusterConnection, RedisOptions, Redis as RedisServerConnection } from './ioredis-types';

/** A connection the engine runs on: one Redis, or a Redis Cluster. */
export type RedisConnection = RedisServerConnection | ClusterConnection;

/** How to reach Redis: an existing connection (kept open on close) or a URL (owned and closed). */
export interface ConnectionOptions {
  /** An ioredis `Redis` or `Cluster` instance. The caller keeps ownership: `close()` leaves it open. */
  redis?: RedisConnection;
  /** A redis:// URL; a connection is created and closed by `close()`. @default process.env.REDIS_URL */
  url?: string;
}

/**
 * Opens (or adopts) a connection; `owned` says whether we must close it. The one place a
 * connection is created: from a URL, from ioredis options (`redisOptions`, which also adjust a URL's
 * connection), or adopted as given. Commands wait for a reconnect rather than fail after a few
 * retries (`maxRetriesPerRequest: null`), unless `redisOptions` says otherwise.
 */
export function openConnection(options: ConnectionOptions & { redisOptions?: RedisOptions }): { redis: RedisConnection; owned: boolean } {
  if (options.redis) return { redis: options.redis, owned: false };
  const settings: RedisOptions = { maxRetriesPerRequest: null, ...options.redisOptions };
  const url = options.url ?? process.env.REDIS_URL;
  if (url) return { redis: new Redis(url, settings), owned: true };
  if (options.redisOptions) return { redis: new Redis(settings), owned: true };
  throw new ConfigurationError('No Redis connection given. Pass { redis } (an ioredis instance) or { url }, or set REDIS_URL.');
}

/** Whether `value` is an ioredis connection (a Redis or a Cluster) rather than options or a URL. */
export function isConnection(value: unknown): value is RedisConnection {
  return value instanceof Redis || value instanceof Cluster;
}

/** Closes a connection without waiting on a dead server. */
export async function closeConnection(redis: RedisConnection): Promise<void> {
  // QUIT waits in the offline queue while Redis is unreachable (and would wait forever, as calls
  // retry without limit): a connection that is not ready is dropped at once, and a QUIT that gets
  // no answer within a second is too.
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([redis.quit(), new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error('QUIT unanswered')), QUIT_TIMEOUT_MS)))]);
  } catch {
    redis.disconnect();
  } finally {
    clearTimeout(timer);
  }
}

/** How long closing waits for Redis to answer QUIT before dropping the connection. */
const QUIT_TIMEOUT_MS = 1_000;

/**
 * Where the errors of a connection the library opens go (a `RedisHealth`): every such connection
 * has an `error` listener, so ioredis never prints "Unhandled error event".
 */
export interface ConnectionWatcher {
  watch(connection: RedisConnection): void;
}

/**
 * A copy of `redis` with its options. The two branches do the same at run time: ioredis types
 * `Redis#duplicate` and `Cluster#duplicate` differently, so a union cannot call either.
 */
function copyOf(redis: RedisConnection): RedisConnection {
  if (redis instanceof Cluster) return redis.duplicate();
  return redis.duplicate();
}

/** A second connection to the same server(s), for blocking commands or reading a stream; watched by `watcher`. */
export function duplicateConnection(redis: RedisConnection, watcher: ConnectionWatcher): RedisConnection {
  const connection = copyOf(redis);
  watcher.watch(connection);
  return connection;
}

/**
 * A connection to subscribe on, watched by `watcher`. On a Cluster, a plain connection to one
 * master node, picked at random: PUBLISH reaches every node, and a plain connection reports its
 * reconnects (a Cluster's subscriber does not). It gives up after about ten failed reconnects
 * ('end'), so that the caller can pick a node again.
 */
export function subscriberConnection(redis: RedisConnection, watcher: ConnectionWatcher): RedisConnection {
  const nodes = redis instanceof Cluster ? redis.nodes('master') : [];
  const connection =
    nodes.length === 0
      ? copyOf(redis)
      : nodes[Math.floor(Math.random() * nodes.length)].duplicate({ retryStrategy: (times: number) => (times > 10 ? null : Math.min(times * 100, 1_000)) });
  watcher.watch(connection);
  return connection;
}
