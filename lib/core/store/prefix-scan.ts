import { Cluster } from 'ioredis';

import type { RedisConnection } from './connection';
import type { RedflowKeys } from './keys';

/** The connections to run a keyspace command on: the one Redis, or every master of a cluster. */
export async function masterNodes(redis: RedisConnection, keys: RedflowKeys): Promise<RedisConnection[]> {
  if (!(redis instanceof Cluster)) return [redis];
  // The node list is known once the cluster has answered a first command.
  if (!redis.nodes('master').length) await redis.exists(keys.workflows());
  return redis.nodes('master');
}

/**
 * Calls `onKeys` with the keys of the prefix matching `pattern` (a glob after `{prefix}:`), batch
 * by batch, on every master. For maintenance only (backfills, resets): never on a run's path.
 */
export async function scanPrefix(
  redis: RedisConnection,
  keys: RedflowKeys,
  pattern: string,
  onKeys: (keys: string[], node: RedisConnection) => Promise<void>,
): Promise<void> {
  const match = `${keys.base.replace(/[*?[\]\\]/g, '\\$&')}${pattern}`;
  for (const node of await masterNodes(redis, keys)) {
    let cursor = '0';
    do {
      const [next, found] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      if (found.length) await onKeys(found, node);
    } while (cursor !== '0');
  }
}
