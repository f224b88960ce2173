/**
 * ioredis' types, imported from the files that declare them rather than from 'ioredis' itself.
 * ioredis 6's index.d.ts re-exports its error classes, whose declarations import 'redis-errors', a
 * package without types: an app compiled with `strict` and `skipLibCheck: false` would fail with
 * TS7016 as soon as one of our public declarations named 'ioredis'. These are the same classes
 * (index.d.ts re-exports them from these files), so any ioredis instance fits; the runtime values
 * still come from 'ioredis'. test/package/compat.spec.ts compiles apps against the latest ioredis 6
 * with `skipLibCheck: false`.
 */
import type Cluster from 'ioredis/built/cluster';
import type Redis from 'ioredis/built/Redis';
import type { RedisOptions } from 'ioredis/built/redis/RedisOptions';

export type { Cluster, Redis, RedisOptions };
