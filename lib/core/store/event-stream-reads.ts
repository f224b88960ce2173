import type { RedisConnection } from './connection';

/** Entries of the event stream as XREAD returns them: [stream, [id, [field, value, ...]][]][], or null when none came. */
export type StreamReply = [string, [string, string[]][]][] | null;

/** The id of the newest entry of the stream at `key`, or '0-0' when it is empty. */
export async function lastEntryId(redis: RedisConnection, key: string): Promise<string> {
  const last = await redis.xrevrange(key, '+', '-', 'COUNT', 1);
  return last[0]?.[0] ?? '0-0';
}

/** Up to `count` entries after `afterId`, waiting up to `blockMs` for one (XREAD BLOCK, on a connection of its own). */
export async function readEntries(connection: RedisConnection, key: string, afterId: string, count: number, blockMs: number): Promise<StreamReply> {
  return (await connection.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', key, afterId)) as StreamReply;
}

/** Up to `count` entries of the stream at `key`, newest first, from `end` ('+' or an exclusive '(<id>') back. */
export async function entriesBefore(redis: RedisConnection, key: string, end: string, count: number): Promise<[string, string[]][]> {
  return (await redis.xrevrange(key, end, '-', 'COUNT', count)) as [string, string[]][];
}
