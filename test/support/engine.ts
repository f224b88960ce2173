import { createHash } from 'node:crypto';
import { Cluster, Redis } from 'ioredis';

import { startWorker, WorkflowRegistry, type PayloadCodec, type RedisConnection, type WorkerRuntimeOptions } from '../../lib';
import { loadLibrary, loadScript, SCRIPTS, type ScriptName } from '../../lib/core/store/scripts/script-loader';
import { RedflowTestEngine, TEST_RUNTIME } from '../../lib/testing/core';

/** True when the suite runs against the 3-master Redis Cluster. */
export const clusterMode = Boolean(process.env.REDFLOW_TEST_CLUSTER_NODES);

/** A new connection to the test Redis (standalone or cluster) started by the global setup. */
export function connect(): RedisConnection {
  const nodes = process.env.REDFLOW_TEST_CLUSTER_NODES;
  if (nodes) {
    return new Cluster(
      nodes.split(',').map((n) => ({ host: n.split(':')[0], port: Number(n.split(':')[1]) })),
      { redisOptions: { maxRetriesPerRequest: null } },
    );
  }
  const url = process.env.REDFLOW_TEST_REDIS_URL;
  if (!url) throw new Error('The jest global setup did not start Redis: run the tests with `npm test`.');
  return new Redis(url, { maxRetriesPerRequest: null });
}

/** Short timings so recovery and scheduling happen within a test's patience. */
export const FAST_RUNTIME = { ...TEST_RUNTIME };

/**
 * One test's engine: the package's own `createTestEngine` (its own prefix, registry, client and
 * workers) on the shared test Redis, standalone or cluster. `close()` also closes the connection.
 */
export class TestEngine extends RedflowTestEngine {
  constructor(options: { codec?: PayloadCodec } = {}) {
    super({ redis: connect(), ...options });
  }

  override async close(): Promise<void> {
    await super.close();
    await this.redis.quit();
  }
}

/** A promise with its resolve function, to await an event instead of sleeping. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (value: T) => void } {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Polls `check` every 10 ms until it returns a truthy value (or throws after `timeoutMs`). */
export async function eventually<T>(check: () => Promise<T> | T, timeoutMs = 5_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`Condition not met within ${timeoutMs} ms: ${check.toString()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Counts the script calls a connection sends, by script name (FCALL or EVALSHA): the Redis round
 * trips the engine spends. Works by wrapping the connection's `sendCommand`. A call Redis answered
 * "function not found" (the first call on a new Redis, before the library is loaded) counts too.
 */
export function countScriptCalls(redis: RedisConnection): Record<string, number> {
  const byHash = new Map<string, ScriptName>();
  const { functions } = loadLibrary();
  for (const name of Object.keys(SCRIPTS) as ScriptName[]) {
    byHash.set(createHash('sha1').update(loadScript(name)).digest('hex'), name);
    byHash.set(functions[name], name);
  }
  const counts: Record<string, number> = {};
  const target = redis as unknown as { sendCommand: (command: { name: string; args: unknown[] }, ...rest: unknown[]) => unknown };
  const original = target.sendCommand.bind(redis);
  target.sendCommand = (command, ...rest) => {
    const script = command.name === 'evalsha' || command.name === 'fcall';
    const name = script ? (byHash.get(String(command.args[0])) ?? command.name) : command.name;
    counts[name] = (counts[name] ?? 0) + 1;
    return original(command, ...rest);
  };
  return counts;
}

/**
 * The body of a fixture run as a child worker process: reads its prefix from `prefixEnv`,
 * defines its workflows and serves with FAST_RUNTIME until killed, calling `started` once its
 * worker has started. Errors go to stderr.
 */
export function runFixtureWorker(options: {
  name: string;
  prefixEnv: string;
  concurrency: number;
  /** Worker runtime options over FAST_RUNTIME. */
  runtime?: WorkerRuntimeOptions;
  define: (registry: WorkflowRegistry, redis: RedisConnection, prefix: string) => void;
  started?: (redis: RedisConnection, prefix: string) => Promise<unknown>;
}): void {
  const start = async () => {
    const prefix = process.env[options.prefixEnv];
    if (!prefix) throw new Error(`${options.name} needs ${options.prefixEnv}`);
    const redis = connect();
    const registry = new WorkflowRegistry();
    options.define(registry, redis, prefix);
    // The worker's timers and connections keep the process alive until it is killed.
    await startWorker({ app: options.name, redis, prefix, registry, concurrency: options.concurrency, runtime: { ...FAST_RUNTIME, ...options.runtime } });
    await options.started?.(redis, prefix);
  };
  start().catch((error: unknown) => {
    process.stderr.write(`${options.name} failed: ${(error as Error)?.stack ?? String(error)}\n`);
    process.exit(1);
  });
}
