import { randomBytes } from 'node:crypto';
import {
  createAdmin,
  createClient,
  startWorker,
  TimeoutError,
  WorkflowRegistry,
  type RedisConnection,
  type RunState,
  type RunStatus,
  type StepState,
  type StoredError,
  type Worker,
  type WorkerOptions,
  type WorkerRuntimeOptions,
  type WorkflowClient,
  type WorkflowDefinition,
} from '../core';
import { openConnection } from '../core/store/connection';
import { TERMINAL_STATUSES } from '../core/definition/types';
import type { StepMock } from '../core/worker/step-runtime';
import { TestRedisServer } from './redis-server';
import { VirtualClock } from './virtual-clock';

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
}

/**
 * Worker timings for tests: a stalled run is recovered after about a second, and scheduled runs
 * start within 100 ms, instead of the production defaults (30 s leases).
 */
export const TEST_RUNTIME: Readonly<WorkerRuntimeOptions> = { leaseMs: 1_000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 };

/**
 * A mocked step of `engine.run()`: the step's function is not called; `output` is its result, or
 * `error` (an Error or a message) is thrown from it, through the step's normal retry path.
 */
export type StepMockOf<T = unknown> = { output: T } | { error: Error | string };

/** Options of `engine.run()`. */
export interface TestRunOptions {
  /** Steps to mock, by step name. */
  steps?: Record<string, StepMockOf>;
  /** How long to wait for the run to end or wait, in real ms. @default 5000 */
  timeoutMs?: number;
}

/**
 * Where a run stands when `run()` or `runUntilWaiting()` resolves. `status` is the stored status,
 * except that a suspended run (waiting for a time, a signal, an event or a child run, or for a
 * retry delay) is `'waiting'`.
 */
export interface TestRunResult<TOutput = unknown> {
  runId: string;
  status: Exclude<RunStatus, 'scheduled'> | 'waiting';
  output?: TOutput;
  error?: StoredError;
  /** The run's step records, as `client.getRunSteps` returns them. */
  steps: StepState[];
  /** The steps that wait (pending `waitFor`, signals, events, child runs). */
  waits: StepState[];
  /** The run as `client.getRun` returns it. */
  state: RunState<TOutput>;
}

const DEFAULT_TIMEOUT_MS = 5_000;

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
  private readonly mocks = new Map<string, Record<string, StepMockOf>>();
  private readonly starting = new Set<Promise<unknown>>();
  private defaultWorker: Promise<Worker> | undefined;

  constructor(options: TestEngineOptions = {}) {
    const url = options.url ?? (options.redis ? undefined : process.env.REDIS_URL);
    if (!options.redis && !url) this.server = TestRedisServer.start();
    const connection = this.server ? openConnection({ redisOptions: { path: this.server.socket } }) : openConnection({ redis: options.redis, url });
    this.redis = connection.redis;
    this.owned = connection.owned;
    this.prefix = options.prefix ?? `test:${randomBytes(5).toString('hex')}`;
    this.client = createClient({ redis: this.redis, prefix: this.prefix, registry: this.registry, clock: this.clock });
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
      stepMocks: (runId, name) => this.mockOf(runId, name),
      ...options,
      runtime: { ...TEST_RUNTIME, ...options.runtime },
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
    const started = this.client.start(workflow, input);
    this.starting.add(started);
    let runId: string;
    try {
      runId = (await started).id;
      if (options.steps) this.mocks.set(runId, options.steps);
    } finally {
      this.starting.delete(started);
    }
    return this.runUntilWaiting<TOutput>(runId, { timeoutMs: options.timeoutMs });
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
   * run, a retry delay), with its state. Rejects with `TimeoutError` after `timeoutMs` real ms.
   */
  async runUntilWaiting<TOutput = unknown>(runId: string, options: { timeoutMs?: number } = {}): Promise<TestRunResult<TOutput>> {
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await this.client.getRun<TOutput>(runId);
      if (state) {
        const steps = await this.client.getRunSteps(runId);
        const result = this.settled(state, steps);
        if (result) return result;
      }
      if (Date.now() > deadline) throw new TimeoutError(`Waiting for run "${runId}" to end or wait (last status: ${state?.status ?? 'missing'})`, timeoutMs);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** Stops the workers, deletes the prefix's keys and closes (and stops) what this engine opened. */
  async close(): Promise<void> {
    const errors: unknown[] = [];
    const attempt = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (error) {
        errors.push(error);
      }
    };
    await attempt(() => Promise.all(this.workers.map((w) => w.stop({ timeoutMs: 2_000 }))));
    await attempt(() => createAdmin(this.client).resetState());
    await attempt(() => this.client.close());
    if (this.owned) await attempt(() => this.redis.quit());
    if (this.server) await attempt(() => this.server!.stop());
    if (errors.length) throw errors[0];
  }

  /** The result when the run ended or waits, else undefined. */
  private settled<TOutput>(state: RunState<TOutput>, steps: StepState[]): TestRunResult<TOutput> | undefined {
    const now = this.clock.now();
    const waits = steps.filter((s) => s.status === 'waiting');
    const base = { runId: state.id, steps, waits, state, ...(state.output !== undefined ? { output: state.output } : {}), ...(state.error ? { error: state.error } : {}) };
    if (TERMINAL_STATUSES.has(state.status)) return { ...base, status: state.status as TestRunResult['status'] };
    if (state.status !== 'scheduled') return undefined;
    // Scheduled but already due: a worker is about to promote it, it is not waiting.
    const waiting = state.availableAt > now || waits.some((s) => s.wakeAt === undefined || s.wakeAt > now);
    return waiting ? { ...base, status: 'waiting' } : undefined;
  }

  private async mockOf(runId: string, name: string): Promise<StepMock | undefined> {
    // A run started by run() may reach its first step before run() has stored its mocks.
    if (this.starting.size) await Promise.allSettled([...this.starting]);
    const mock = this.mocks.get(runId)?.[name];
    if (!mock) return undefined;
    return 'output' in mock ? { output: mock.output } : { error: typeof mock.error === 'string' ? new Error(mock.error) : mock.error };
  }
}

/**
 * A test engine with a unique prefix and a `VirtualClock`: on the given connection, on `url` or
 * `REDIS_URL`, or else on a `redis-server` it starts (and stops on `close()`).
 */
export function createTestEngine(options: TestEngineOptions = {}): RedflowTestEngine {
  return new RedflowTestEngine(options);
}
