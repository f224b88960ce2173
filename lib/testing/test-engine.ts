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
  type WorkflowDefinition,
} from '../core';
import { assertKnownKeys, DEPRECATED_DURATION_NAMES } from '../core/definition/option-checks';
import type { PayloadCodec } from '../core/definition/payload-codec';
import { openConnection } from '../core/store/connection';
import { TestRedisServer } from './redis-server';
import { TestRunner, type TestRunOptions, type TestRunResult, type WaitOptions } from './test-runner';
import { VirtualClock } from './virtual-clock';

export type { StepMockOf, TestRunOptions, TestRunResult, WaitOptions } from './test-runner';

/** Options of `createTestEngine`. */
export interface TestEngineOptions {
  /** An ioredis connection to use (left open by `close()`). */
  redis?: RedisConnection;
  /**
   * A redis:// URL to connect to (closed by `close()`). Without `redis`, `url` and `REDIS_URL`,
   * the engine starts a `redis-server` of its own (no persistence) and stops it on `close()`.
   * @default process.env.REDIS_URL
   */
  url?: string;
  /** The key prefix; give none to get a unique one, so tests never see each other's runs. */
  prefix?: string;
  /** The payload codec of the engine's client and workers (the client option `codec`), to test an app's codec. @default none */
  codec?: PayloadCodec;
}

/** The keys of `TestEngineOptions`. */
const TEST_ENGINE_OPTION_KEYS = ['redis', 'url', 'prefix', 'codec'] as const satisfies ReadonlyArray<keyof TestEngineOptions>;

/**
 * Worker timings for tests: a stalled run is recovered after about a second, and scheduled runs
 * start within 100 ms, instead of the production defaults (30 s leases).
 */
export const TEST_RUNTIME: Readonly<WorkerRuntimeOptions> = { leaseDuration: 1_000, heartbeatInterval: 250, reaperInterval: 100, blockTimeout: 100 };

/**
 * `TEST_RUNTIME` under the worker's own runtime options. An option given by its deprecated name
 * (`leaseMs`) replaces the test timing of its current name (`leaseDuration`), so both are never given.
 */
function withTestTimings(runtime: WorkerRuntimeOptions = {}): WorkerRuntimeOptions {
  const timings: Record<string, unknown> = { ...TEST_RUNTIME };
  for (const key of Object.keys(runtime)) {
    const current = DEPRECATED_DURATION_NAMES.get(key);
    if (current !== undefined) delete timings[current];
  }
  return { ...timings, ...runtime };
}

/**
 * An engine for one test file or test: its own registry, a client and workers on a prefix of its
 * own, on a real Redis, with a `VirtualClock`. `close()` stops the workers, deletes every key of
 * the prefix, and stops the redis-server it started, if any.
 */
export class RedflowTestEngine {
  readonly registry = new WorkflowRegistry();
  readonly prefix: string;
  readonly redis: RedisConnection;
  readonly client: WorkflowClient;
  /** The engine's time: `await engine.clock.advance('1h')` fires what is due by then. */
  readonly clock = new VirtualClock();
  /** The redis-server this engine started (no `redis`, `url` or `REDIS_URL` given), if any. */
  readonly server: TestRedisServer | undefined;
  private readonly owned: boolean;
  private readonly workers: Worker[] = [];
  private readonly runner: TestRunner;
  private defaultWorker: Promise<Worker> | undefined;

  constructor(options: TestEngineOptions = {}) {
    assertKnownKeys('createTestEngine options', options, TEST_ENGINE_OPTION_KEYS, {
      registry: 'The engine has a registry of its own: define workflows with engine.define(...) or engine.registry.define(...).',
    });
    const url = options.url ?? (options.redis ? undefined : process.env.REDIS_URL);
    if (!options.redis && !url) this.server = TestRedisServer.start();
    const connection = this.server ? openConnection({ redisOptions: { path: this.server.socket } }) : openConnection({ redis: options.redis, url });
    this.redis = connection.redis;
    this.owned = connection.owned;
    this.prefix = options.prefix ?? `test:${randomBytes(5).toString('hex')}`;
    this.client = createClient({ redis: this.redis, prefix: this.prefix, registry: this.registry, clock: this.clock, codec: options.codec });
    // The client leaves a connection it was given alone: the one opened here logs its errors through it.
    if (this.owned) this.client.health.watch(this.redis);
    this.runner = new TestRunner(this.client, this.clock);
  }

  /** Defines a workflow in this engine's registry (see `defineWorkflow`). */
  get define(): WorkflowRegistry['define'] {
    return this.registry.define.bind(this.registry);
  }

  /**
   * Starts a worker for this engine's workflows, with `TEST_RUNTIME` timings unless overridden.
   * Runs that fail are what many tests assert: it does not log them (`logFailedRuns: false`)
   * unless asked to.
   */
  async worker(options: Partial<WorkerOptions> = {}): Promise<Worker> {
    const worker = await startWorker({
      app: 'test-app',
      client: this.client,
      registry: this.registry,
      concurrency: 4,
      logFailedRuns: false,
      stepMocks: this.runner.stepMocks,
      ...options,
      runtime: withTestTimings(options.runtime),
    });
    this.workers.push(worker);
    return worker;
  }

  /**
   * Starts a run and waits until it ends or waits (see `TestRunResult`), with the given steps
   * mocked. Starts a worker first if this engine has none.
   */
  async run<TInput, TOutput>(workflow: WorkflowDefinition<TInput, TOutput>, input: TInput, options: TestRunOptions = {}): Promise<TestRunResult<TOutput>> {
    if (!this.workers.length) await (this.defaultWorker ??= this.worker());
    return this.runner.run<TOutput>(() => this.client.start(workflow, input), options);
  }

  /** Sends a signal to a run (`client.signal`). */
  signal(runId: string, name: string, payload?: unknown): Promise<boolean> {
    return this.client.signal(runId, name, payload);
  }

  /** Emits an event (`client.emitEvent`); returns the ids of the runs it started. */
  emit(event: string, payload: unknown): Promise<string[]> {
    return this.client.emitEvent(event, payload);
  }

  /**
   * Resolves when the run has ended or is suspended waiting (a time, a signal, an event, a child
   * run, a retry delay), with its state. Rejects with `TimeoutError` after `timeout` (real time).
   */
  runUntilWaiting<TOutput = unknown>(runId: string, options: WaitOptions = {}): Promise<TestRunResult<TOutput>> {
    return this.runner.runUntilWaiting<TOutput>(runId, options);
  }

  /** Stops the workers, deletes the prefix's keys and closes (and stops) what this engine opened. */
  close(): Promise<void> {
    return tearDownTestPrefix({
      first: () => Promise.all(this.workers.map((w) => w.stop({ timeout: 2_000 }))),
      client: this.client,
      redis: this.redis,
      owned: this.owned,
      server: this.server,
    });
  }
}

/**
 * Tears down a test prefix, each step tried even when an earlier one failed: `first` (stopping
 * workers), then the prefix's keys deleted, the client closed, the connection closed when it was
 * opened here, and the redis-server stopped when one was started. Rejects with the first error.
 */
export async function tearDownTestPrefix(parts: {
  first?: () => Promise<unknown>;
  client: WorkflowClient;
  redis: RedisConnection;
  owned: boolean;
  server?: TestRedisServer;
}): Promise<void> {
  const errors: unknown[] = [];
  const attempt = async (fn: () => Promise<unknown>) => {
    try {
      await fn();
    } catch (error) {
      errors.push(error);
    }
  };
  if (parts.first) await attempt(parts.first);
  await attempt(() => createAdmin(parts.client).resetState());
  await attempt(() => parts.client.close());
  if (parts.owned) await attempt(() => parts.redis.quit());
  if (parts.server) await attempt(() => parts.server!.stop());
  if (errors.length) throw errors[0];
}

/**
 * A test engine with a unique prefix and a `VirtualClock`: on the given connection, on `url` or
 * `REDIS_URL`, or else on a `redis-server` it starts (and stops on `close()`).
 */
export function createTestEngine(options: TestEngineOptions = {}): RedflowTestEngine {
  return new RedflowTestEngine(options);
}
