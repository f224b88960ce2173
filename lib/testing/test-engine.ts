import { randomBytes } from 'node:crypto';
import {
  createAdmin,
  createClient,
  startWorker,
  WorkflowRegistry,
  type RedisConnection,
  type Worker,
  type WorkerOptions,
  type WorkerRuntimeOptions,
  type WorkflowClient,
} from '../core';
import { openConnection } from '../core/store/connection';

/** Options of `createTestEngine`. */
export interface TestEngineOptions {
  /** An ioredis connection to use (left open by `close()`). */
  redis?: RedisConnection;
  /** A redis:// URL to connect to (closed by `close()`). @default process.env.REDIS_URL */
  url?: string;
  /** The key prefix; give none to get a unique one, so tests never see each other's runs. */
  prefix?: string;
}

/**
 * Worker timings for tests: a stalled run is recovered after about a second, and scheduled runs
 * start within 100 ms, instead of the production defaults (30 s leases).
 */
export const TEST_RUNTIME: Readonly<WorkerRuntimeOptions> = { leaseMs: 1_000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 };

/**
 * An engine for one test file or test: its own registry, a client and workers on a prefix of its
 * own, on a real Redis. `close()` stops the workers and deletes every key of the prefix.
 */
export class RedflowTestEngine {
  readonly registry = new WorkflowRegistry();
  readonly prefix: string;
  readonly redis: RedisConnection;
  readonly client: WorkflowClient;
  private readonly owned: boolean;
  private readonly workers: Worker[] = [];

  constructor(options: TestEngineOptions = {}) {
    const { redis, owned } = openConnection({ redis: options.redis, url: options.url });
    this.redis = redis;
    this.owned = owned;
    this.prefix = options.prefix ?? `test:${randomBytes(5).toString('hex')}`;
    this.client = createClient({ redis, prefix: this.prefix, registry: this.registry });
  }

  /** Defines a workflow in this engine's registry (see `defineWorkflow`). */
  get define(): WorkflowRegistry['define'] {
    return this.registry.define.bind(this.registry);
  }

  /** Starts a worker for this engine's workflows, with `TEST_RUNTIME` timings unless overridden. */
  async worker(options: Partial<WorkerOptions> = {}): Promise<Worker> {
    const worker = await startWorker({
      app: 'test-app',
      client: this.client,
      registry: this.registry,
      concurrency: 4,
      ...options,
      runtime: { ...TEST_RUNTIME, ...options.runtime },
    });
    this.workers.push(worker);
    return worker;
  }

  /** Stops the workers, deletes the prefix's keys and closes what this engine opened. */
  async close(): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop({ timeoutMs: 2_000 })));
    await createAdmin(this.client).resetState();
    await this.client.close();
    if (this.owned) await this.redis.quit();
  }
}

/** A test engine on `REDIS_URL` (or the given connection) with a unique prefix. */
export function createTestEngine(options: TestEngineOptions = {}): RedflowTestEngine {
  return new RedflowTestEngine(options);
}
