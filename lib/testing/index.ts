/**
 * `nestjs-redflow/testing`: helpers for testing workflows on a real Redis. `createTestEngine()`
 * gives a test its own prefix, registry, client and workers, and deletes its keys on `close()`.
 */
export { createTestEngine, RedflowTestEngine, TEST_RUNTIME, type TestEngineOptions } from './test-engine';
