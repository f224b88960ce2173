import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

import { duplicateConnection, openConnection, subscriberConnection, type ConnectionWatcher, type RedisConnection } from '../../lib/core/store/connection';

/**
 * A connection is opened in one place, lib/core/store/connection.ts: from a URL or options, as a
 * copy of another, or as a subscriber on one cluster node. No Redis needed (lazyConnect).
 */

const LIB = join(__dirname, '..', '..', 'lib');
const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : [],
  );
/** TypeScript without its comments, so that prose mentioning `new Redis(` does not count. */
const code = (ts: string) => ts.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/[^\n]*/g, '$1');

describe('connections', () => {
  it('are opened, copied and subscribed in lib/core/store/connection.ts only: no new Redis(, new Cluster( or .duplicate( elsewhere in lib/', () => {
    const opening = /\bnew\s+(Redis|Cluster|IORedis)\s*\(|\.duplicate\s*\(/;
    const found = sources(LIB)
      .filter((file) => opening.test(code(readFileSync(file, 'utf8'))))
      .map((file) => relative(LIB, file));
    expect(found).toEqual(['core/store/connection.ts']);
  });

  it('the check above sees each way a connection was opened before', () => {
    const opening = /\bnew\s+(Redis|Cluster|IORedis)\s*\(|\.duplicate\s*\(/;
    for (const line of [
      `this.redis = connection ? new Redis(connection, { maxRetriesPerRequest: null }) : new Redis({ path });`,
      `if (!(redis instanceof Cluster)) return redis.duplicate();`,
      `return node.duplicate({ retryStrategy });`,
      `const cluster = new Cluster([{ host, port }]);`,
    ])
      expect([line, opening.test(code(line))]).toEqual([line, true]);
  });

  it('every copy or subscriber connection is handed to the watcher that takes its errors', async () => {
    const watched: RedisConnection[] = [];
    const watcher: ConnectionWatcher = { watch: (connection) => watched.push(connection) };
    const { redis, owned } = openConnection({ redisOptions: { lazyConnect: true, port: 1 } });
    expect(owned).toBe(true);
    const copy = duplicateConnection(redis, watcher);
    const subscriber = subscriberConnection(redis, watcher);
    expect(watched).toEqual([copy, subscriber]);
    expect(copy).not.toBe(redis);
    expect(subscriber).not.toBe(redis);
    for (const connection of [redis, copy, subscriber]) connection.disconnect();
  });
});
