/**
 * `nestjs-redflow/testing`: helpers for testing workflows on a real Redis. `createTestEngine()`
 * gives a test its own prefix, registry, client, workers and `VirtualClock`, deletes its keys on
 * `close()`, and starts a throwaway redis-server when no Redis is given. Needs no Nest.
 */
export {
  createTestEngine,
  RedflowTestEngine,
  TEST_RUNTIME,
  type StepMockOf,
  type TestEngineOptions,
  type TestRunOptions,
  type TestRunResult,
} from './test-engine';
export { VirtualClock } from './virtual-clock';
export { RedisServerNotFoundError, RedisServerStartError, type TestRedisServer } from './redis-server';
