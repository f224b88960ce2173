import { randomBytes } from 'node:crypto';

import { createClient, WorkflowRegistry, type RedisConnection } from '../../core';
import { openConnection } from '../../core/store/connection';
import type { RedflowModuleOptions } from '../../nest/redflow-options.interface';
import { TestRedisServer } from '../redis-server';
import { tearDownTestPrefix, TEST_RUNTIME } from '../test-engine';
import { TestRunner } from '../test-runner';
import { VirtualClock } from '../virtual-clock';

/** Options of `RedflowTestingModule.forRoot`. */
export interface RedflowTestingOptions {
  /**
   * A redis:// URL or an ioredis instance (left open on close). Without it and without
   * `REDIS_URL`, the module starts a `redis-server` of its own and stops it on close.
   * @default process.env.REDIS_URL
   */
  connection?: string | RedisConnection;
  /** The app id of the workflows. @default "redflow-test" */
  app?: string;
}

/**
 * Everything one testing module owns: its clock, connection, prefix, redis-server and step mocks.
 * Created per module instance (no static state), cleaned up by `close()`.
 */
export class RedflowTestingContext {
  readonly clock = new VirtualClock();
  readonly prefix = `test:${randomBytes(5).toString('hex')}`;
  readonly redis: RedisConnection;
  readonly server: TestRedisServer | undefined;
  readonly runner: TestRunner;
  private readonly owned: boolean;

  constructor(private readonly options: RedflowTestingOptions = {}) {
    const connection = options.connection ?? process.env.REDIS_URL;
    if (!connection) this.server = TestRedisServer.start();
    const opened = this.server
      ? openConnection({ redisOptions: { path: this.server.socket } })
      : typeof connection === 'string'
        ? openConnection({ url: connection })
        : openConnection({ redis: connection });
    this.redis = opened.redis;
    this.owned = opened.owned;
    // Only for reading runs: RedflowClient is created later, by the module.
    const client = createClient({ redis: this.redis, prefix: this.prefix, clock: this.clock, registry: new WorkflowRegistry() });
    // The client leaves a connection it was given alone: the one opened here logs its errors through it.
    if (this.owned) client.health.watch(this.redis);
    this.runner = new TestRunner(client, this.clock);
  }

  /** The options of the RedflowModule under test: fast timings, an in-process worker. */
  moduleOptions(): RedflowModuleOptions {
    return {
      app: this.options.app ?? 'redflow-test',
      connection: this.redis,
      prefix: this.prefix,
      clock: this.clock,
      stepMocks: this.runner.stepMocks,
      worker: { concurrency: 4, runtime: { ...TEST_RUNTIME } },
      shutdownTimeout: 2_000,
    };
  }

  /** Deletes the prefix's keys, closes the connection it opened and stops its redis-server. */
  close(): Promise<void> {
    return tearDownTestPrefix({ client: createClient({ redis: this.redis, prefix: this.prefix }), redis: this.redis, owned: this.owned, server: this.server });
  }
}
