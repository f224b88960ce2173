/**
 * Bad inputs across the public API, as one table. The engine's promise: a value that would reach
 * a Lua script (or change on its way through JSON) is checked in TypeScript first and rejected with
 * a named error class whose message names the option, the value and the allowed range; nothing is
 * stored. Each case asserts the exact class and parts of the message; a case that does not throw
 * fails. The last test checks that the store holds no stranded run and no index entry without its
 * run, and prints how many bad inputs were tried.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import {
  ConfigurationError,
  createClient,
  IdempotencyConflictError,
  InputValidationError,
  InvalidCronError,
  OutputSerializationError,
  PayloadTooLargeError,
  RetryAfterError,
  startWorker,
  UnknownWorkflowError,
  WorkflowRegistry,
  type ClientOptions,
  type StepApi,
  type WorkerOptions,
  type WorkflowDefinition,
  type WorkflowOptions,
} from '../../lib';
import { eventually, TestEngine } from '../support/engine';

/** The error classes a bad input may be rejected with. */
type ErrorClass =
  | typeof ConfigurationError
  | typeof InvalidCronError
  | typeof InputValidationError
  | typeof OutputSerializationError
  | typeof PayloadTooLargeError
  | typeof UnknownWorkflowError
  | typeof IdempotencyConflictError
  | typeof TypeError;

interface BadInput {
  /** Where and what, e.g. `createClient prefix ""`. */
  what: string;
  /** Makes the call; it must throw or reject. */
  attempt: () => unknown;
  error: ErrorClass;
  /** Every one of these must be in the message: the option (or thing) and, where useful, the value. */
  message: string[];
}

/** A value of the wrong type, for the type checker: the whole point is passing it anyway. */
const bad = (value: unknown): never => value as never;

/** Past the 10-year ceiling of every duration and timestamp. */
const ELEVEN_YEARS_MS = 11 * 365.25 * 86_400_000;
const MiB = 1024 * 1024;
/** How long one case may take before it counts as hanging. */
const CASE_TIMEOUT_MS = 10_000;

let engine: TestEngine;
let plain: WorkflowDefinition<unknown, unknown>;
/** A client of the same prefix whose payload limit is 100 bytes. */
let small: ReturnType<typeof createClient>;

const cases: BadInput[] = [];
const add = (what: string, error: ErrorClass, message: string | string[], attempt: () => unknown) =>
  cases.push({ what, error, message: typeof message === 'string' ? [message] : message, attempt });

/** Workflows whose handler makes one bad step call; defined before the shared worker starts. */
const stepWorkflows: Array<{ name: string; options: WorkflowOptions; handler: (ctx: { step: StepApi }) => unknown }> = [];

/**
 * A bad call inside a running workflow: the run fails, and `result()` rejects with the error the
 * worker stored in Redis, read back into its class.
 */
function addStep(what: string, error: ErrorClass, message: string | string[], handler: (step: StepApi) => unknown, options: WorkflowOptions = {}) {
  const name = `step-case-${stepWorkflows.length + 1}`;
  stepWorkflows.push({ name, options, handler: ({ step }) => handler(step) });
  add(`step API: ${what}`, error, message, async () => {
    const handle = await engine.client.runByName(name, null);
    return handle.result({ timeoutMs: 5_000 });
  });
}

const clientWith = (options: Record<string, unknown>) =>
  createClient({ redis: engine.redis, registry: engine.registry, prefix: engine.prefix, ...options } as ClientOptions);

/** Starts a worker that serves nothing of this suite; one that starts (a bug) is stopped at once. */
async function workerWith(options: Record<string, unknown>) {
  const worker = await startWorker({
    app: 'bad-inputs',
    client: engine.client,
    registry: new WorkflowRegistry(),
    queues: ['bad-inputs-unused'],
    ...options,
  } as WorkerOptions);
  await worker.stop({ timeoutMs: 0 });
  return worker;
}

/**
 * Stops a worker with bad options: the call must reject without stopping it. The worker is then
 * stopped properly (a stop that wrongly accepted them is the same stop).
 */
async function stopWith(options: unknown) {
  const worker = await startWorker({ app: 'bad-inputs', client: engine.client, registry: new WorkflowRegistry(), queues: ['bad-inputs-unused'] });
  try {
    await worker.stop(options as never);
  } finally {
    await worker.stop({ timeoutMs: 0 });
  }
}

/**
 * A client whose Redis is down (nothing listens on port 1), so every call is its first: input must
 * be reported as bad before the first-call check, which would reject with RedisUnavailableError.
 */
let down: ReturnType<typeof createClient>;

let defined = 0;
/** Defines a workflow with the given options under a fresh valid name (unless `name` is given). */
const define = (options: unknown, name = `bad-def-${++defined}`) => engine.registry.define(name, options as WorkflowOptions, () => null);

const start = (input: unknown, options?: unknown) => engine.client.start(plain, input, options as never);

// ---------------------------------------------------------------------------------------------
// createClient
// ---------------------------------------------------------------------------------------------
const PREFIX = 'prefix (or REDFLOW_PREFIX)';
add('createClient prefix ""', ConfigurationError, [`${PREFIX} must be a name of 1 to 128 characters`, 'got ""'], () => clientWith({ prefix: '' }));
add('createClient prefix "a b"', ConfigurationError, [`${PREFIX} must not contain whitespace`, 'got "a b"'], () => clientWith({ prefix: 'a b' }));
add('createClient prefix "a{b"', ConfigurationError, [`${PREFIX} must not contain "{" or "}"`, 'got "a{b"'], () => clientWith({ prefix: 'a{b' }));
add('createClient prefix "x}:y{"', ConfigurationError, [`${PREFIX} must not contain "{" or "}"`, 'got "x}:y{"'], () => clientWith({ prefix: 'x}:y{' }));
add('createClient prefix "q*"', ConfigurationError, [`${PREFIX} must not contain "*"`, 'got "q*"'], () => clientWith({ prefix: 'q*' }));
add('createClient prefix of 129 characters', ConfigurationError, [`${PREFIX} must be a name of 1 to 128 characters`, '(a string of 129 characters)'], () =>
  clientWith({ prefix: 'p'.repeat(129) }),
);
add('createClient prefix with a control character', ConfigurationError, [`${PREFIX} must be printable`, 'got "a\\u0001b"'], () =>
  clientWith({ prefix: 'a\u0001b' }),
);
add('createClient unknown option "prefx"', ConfigurationError, ['Unknown option "prefx" in createClient options', 'Did you mean "prefix"?'], () =>
  clientWith({ prefx: 'x' }),
);
add('createClient maxPayloadBytes 0', ConfigurationError, ['maxPayloadBytes must be an integer from 1 to', 'got 0'], () => clientWith({ maxPayloadBytes: 0 }));
add('createClient maxPayloadBytes -1', ConfigurationError, ['maxPayloadBytes must be an integer from 1 to', 'got -1'], () =>
  clientWith({ maxPayloadBytes: -1 }),
);
add('createClient maxPayloadBytes NaN', ConfigurationError, ['maxPayloadBytes must be an integer from 1 to', 'got NaN'], () =>
  clientWith({ maxPayloadBytes: NaN }),
);
add(
  'createClient commandTimeoutMs 0',
  ConfigurationError,
  ['commandTimeoutMs must be a duration > 0 and at most 24 days (the longest Node.js timer)', 'got 0'],
  () => clientWith({ commandTimeoutMs: 0 }),
);
add(
  'createClient commandTimeoutMs NaN',
  ConfigurationError,
  ['commandTimeoutMs must be a duration > 0 and at most 24 days (the longest Node.js timer)', 'got NaN'],
  () => clientWith({ commandTimeoutMs: NaN }),
);
add(
  'createClient commandTimeoutMs 1e20',
  ConfigurationError,
  ['commandTimeoutMs must be a duration > 0 and at most 24 days (the longest Node.js timer)', 'got 100000000000000000000'],
  () => clientWith({ commandTimeoutMs: 1e20 }),
);

// ---------------------------------------------------------------------------------------------
// startWorker
// ---------------------------------------------------------------------------------------------
const LEASE = 'runtime.leaseDuration must be a duration > 0 and at most 24 days (the longest Node.js timer)';
add('startWorker runtime.leaseDuration NaN', ConfigurationError, [LEASE, 'got NaN'], () => engine.worker({ runtime: { leaseDuration: NaN } }));
add('startWorker runtime.leaseDuration 0', ConfigurationError, [LEASE, 'got 0'], () => engine.worker({ runtime: { leaseDuration: 0 } }));
add('startWorker runtime.leaseDuration -1', ConfigurationError, [LEASE, 'got -1'], () => engine.worker({ runtime: { leaseDuration: -1 } }));
add('startWorker runtime.leaseDuration Infinity', ConfigurationError, [LEASE, 'got Infinity'], () => engine.worker({ runtime: { leaseDuration: Infinity } }));
add('startWorker runtime.leaseDuration "abc"', ConfigurationError, [LEASE, 'got "abc"'], () => engine.worker({ runtime: { leaseDuration: bad('abc') } }));
add('startWorker runtime.leaseDuration 1e20', ConfigurationError, [LEASE, 'got 100000000000000000000'], () =>
  engine.worker({ runtime: { leaseDuration: 1e20 } }),
);
add(
  'startWorker runtime.heartbeatInterval = leaseDuration',
  ConfigurationError,
  ['runtime.heartbeatInterval (1000 ms) must be shorter than runtime.leaseDuration (1000 ms)'],
  () => engine.worker({ runtime: { leaseDuration: '1s', heartbeatInterval: 1_000 } }),
);
add(
  'startWorker runtime.heartbeatMs > leaseMs (deprecated names)',
  ConfigurationError,
  ['runtime.heartbeatInterval (5000 ms) must be shorter than runtime.leaseDuration (1000 ms)'],
  () => engine.worker({ runtime: { leaseMs: 1_000, heartbeatMs: 5_000 } }),
);
add('startWorker runtime.reaperIntervalMs 0 (deprecated name)', ConfigurationError, ['runtime.reaperIntervalMs must be a duration > 0', 'got 0'], () =>
  engine.worker({ runtime: { reaperIntervalMs: 0 } }),
);
add('startWorker runtime.reaperInterval "0s"', ConfigurationError, ['runtime.reaperInterval must be a duration > 0', 'got "0s"'], () =>
  engine.worker({ runtime: { reaperInterval: '0s' } }),
);
add(
  'startWorker runtime leaseDuration and leaseMs',
  ConfigurationError,
  ['runtime.leaseDuration and runtime.leaseMs are the same option: keep runtime.leaseDuration'],
  () => engine.worker({ runtime: { leaseDuration: '5s', leaseMs: 5_000 } }),
);
add('startWorker runtime.blockTimeoutMs -1', ConfigurationError, ['runtime.blockTimeoutMs must be a duration > 0', 'got -1'], () =>
  engine.worker({ runtime: { blockTimeoutMs: -1 } }),
);
add('startWorker runtime.maxRecoveries 0', ConfigurationError, ['runtime.maxRecoveries must be an integer from 1 to', 'got 0'], () =>
  engine.worker({ runtime: { maxRecoveries: 0 } }),
);
add(
  'startWorker unknown runtime option "leaseMS"',
  ConfigurationError,
  ['Unknown option "leaseMS" in startWorker runtime options', 'Did you mean "leaseDuration"?'],
  () => engine.worker({ runtime: bad({ leaseMS: 1_000 }) }),
);
add('startWorker concurrency 0', ConfigurationError, ['Worker concurrency must be an integer from 1 to', 'got 0'], () => workerWith({ concurrency: 0 }));
add('startWorker concurrency 1.5', ConfigurationError, ['Worker concurrency must be an integer from 1 to', 'got 1.5'], () => workerWith({ concurrency: 1.5 }));
add('startWorker queues ["q|*{"]', ConfigurationError, ['startWorker queues[0] must not contain "{" or "}"', 'got "q|*{"'], () =>
  workerWith({ queues: ['q|*{'] }),
);
add('startWorker queues "default" (a string, not an array)', ConfigurationError, ['queues'], () => workerWith({ queues: 'default' }));
add('startWorker unknown option "concurrncy"', ConfigurationError, ['Unknown option "concurrncy" in startWorker options', 'Did you mean "concurrency"?'], () =>
  workerWith({ concurrncy: 2 }),
);
add('startWorker app ""', ConfigurationError, ['startWorker needs an app'], () => workerWith({ app: '' }));
add('startWorker app with a newline', ConfigurationError, ['startWorker app must not contain control characters', 'got "a\\nb"'], () =>
  workerWith({ app: 'a\nb' }),
);
add('startWorker retentionDays 0', ConfigurationError, ['startWorker retentionDays must be a duration > 0', 'got 0'], () => workerWith({ retentionDays: 0 }));
add('startWorker retention "0d"', ConfigurationError, ['startWorker retention must be a duration > 0', 'got "0d"'], () => workerWith({ retention: '0d' }));
add('startWorker defaultMaxConcurrency 0', ConfigurationError, ['defaultMaxConcurrency must be an integer from 1 to', 'got 0'], () =>
  workerWith({ defaultMaxConcurrency: 0 }),
);
add('startWorker maxPayloadBytes 0 (with a client)', ConfigurationError, ['maxPayloadBytes', 'got 0'], () => workerWith({ maxPayloadBytes: 0 }));
add('startWorker prefix "a b" (with a client)', ConfigurationError, ['prefix'], () => workerWith({ prefix: 'a b' }));
add('worker.stop unknown option "timout"', ConfigurationError, ['Unknown option "timout" in worker.stop options', 'Known options: timeout.'], () =>
  stopWith({ timout: 5 }),
);
add('worker.stop unknown option "timeOut"', ConfigurationError, ['Unknown option "timeOut" in worker.stop options', 'Did you mean "timeout"?'], () =>
  stopWith({ timeOut: 5 }),
);
add('worker.stop timeoutMs NaN', ConfigurationError, ['worker.stop timeoutMs must be a duration >= 0 and at most 24 days', 'got NaN'], () =>
  stopWith({ timeoutMs: NaN }),
);
add('worker.stop timeoutMs -1', ConfigurationError, ['worker.stop timeoutMs must be a duration >= 0', 'got -1'], () => stopWith({ timeoutMs: -1 }));
add('worker.stop timeoutMs 1e20', ConfigurationError, ['worker.stop timeoutMs', 'got 100000000000000000000'], () => stopWith({ timeoutMs: 1e20 }));
add('worker.stop timeoutMs "abc"', ConfigurationError, ['worker.stop timeoutMs', 'got "abc"'], () => stopWith({ timeoutMs: 'abc' }));
add('worker.stop options 5000 (not an object)', ConfigurationError, ['worker.stop options must be an object', 'got 5000'], () => stopWith(5_000));
add('startWorker prefix "a b" (without a client)', ConfigurationError, [`${PREFIX} must not contain whitespace`, 'got "a b"'], () =>
  startWorker({ app: 'bad-inputs', redis: engine.redis, prefix: 'a b', registry: new WorkflowRegistry(), queues: ['bad-inputs-unused'] }).then((w) =>
    w.stop({ timeoutMs: 0 }),
  ),
);

// ---------------------------------------------------------------------------------------------
// defineWorkflow (registry.define)
// ---------------------------------------------------------------------------------------------
const NAME = 'is invalid. Use 1-200 letters, digits';
add('defineWorkflow name ""', ConfigurationError, ['Workflow name "" ', NAME], () => define({}, ''));
add('defineWorkflow name "a b"', ConfigurationError, ['Workflow name "a b" ', NAME], () => define({}, 'a b'));
add('defineWorkflow name "a|b"', ConfigurationError, ['Workflow name "a|b" ', NAME], () => define({}, 'a|b'));
add('defineWorkflow name "-x"', ConfigurationError, ['Workflow name "-x" ', NAME], () => define({}, '-x'));
add('defineWorkflow name "a{b}"', ConfigurationError, ['Workflow name "a{b}" ', NAME], () => define({}, 'a{b}'));
add('defineWorkflow name of 201 characters', ConfigurationError, ['Workflow name "www', NAME], () => define({}, 'w'.repeat(201)));
add('defineWorkflow defined twice', ConfigurationError, ['Workflow "defined-twice" is defined twice in one registry'], () => {
  define({}, 'defined-twice');
  return define({}, 'defined-twice');
});
add('defineWorkflow handler not a function', ConfigurationError, ['Workflow "no-handler" needs a handler function', 'got string'], () =>
  engine.registry.define('no-handler', {}, bad('handler')),
);
add('defineWorkflow queue "q|*{"', ConfigurationError, ['queue of workflow "bad-def-', 'must not contain "{" or "}"', 'got "q|*{"'], () =>
  define({ queue: 'q|*{' }),
);
add('defineWorkflow queue ""', ConfigurationError, ['queue of workflow "bad-def-', 'must be a name of 1 to 128 characters'], () => define({ queue: '' }));
add('defineWorkflow maxAttempts 0', ConfigurationError, ['maxAttempts of workflow "bad-def-', 'must be an integer from 1 to 1000000, got 0'], () =>
  define({ maxAttempts: 0 }),
);
add('defineWorkflow maxAttempts 1.5', ConfigurationError, ['maxAttempts of workflow "bad-def-', 'must be an integer from 1 to 1000000, got 1.5'], () =>
  define({ maxAttempts: 1.5 }),
);
add('defineWorkflow retries.maxAttempts 0', ConfigurationError, ['maxAttempts of workflow "bad-def-', 'got 0'], () => define({ retries: { maxAttempts: 0 } }));
add('defineWorkflow retries.delay -1', ConfigurationError, ['retries.delay of workflow "bad-def-', 'must be a duration >= 0', 'got -1'], () =>
  define({ retries: { delay: -1 } }),
);
add('defineWorkflow retries.delay "abc"', ConfigurationError, ['retries.delay of workflow "bad-def-', 'must be a duration >= 0', 'got "abc"'], () =>
  define({ retries: { delay: 'abc' } }),
);
add('defineWorkflow retries.delay NaN', ConfigurationError, ['retries.delay of workflow "bad-def-', 'must be a duration >= 0', 'got NaN'], () =>
  define({ retries: { delay: NaN } }),
);
add('defineWorkflow maxConcurrency 0', ConfigurationError, ['maxConcurrency of workflow "bad-def-', 'must be an integer >= 1 or Infinity, got 0'], () =>
  define({ maxConcurrency: 0 }),
);
add('defineWorkflow maxConcurrency 1.5', ConfigurationError, ['maxConcurrency of workflow "bad-def-', 'must be an integer >= 1 or Infinity, got 1.5'], () =>
  define({ maxConcurrency: 1.5 }),
);
add('defineWorkflow debounce.period 0', ConfigurationError, ['debounce.period of workflow "bad-def-', 'must be a duration > 0', 'got 0'], () =>
  define({ debounce: { period: 0, key: 'k' } }),
);
add('defineWorkflow debounce.period "x"', ConfigurationError, ['debounce.period of workflow "bad-def-', 'must be a duration > 0', 'got "x"'], () =>
  define({ debounce: { period: 'x', key: 'k' } }),
);
add(
  'defineWorkflow debounce.timeout 1e20',
  ConfigurationError,
  ['debounce.timeout of workflow "bad-def-', 'at most 10 years', 'got 100000000000000000000'],
  () => define({ debounce: { period: '1s', timeout: 1e20, key: 'k' } }),
);
add('defineWorkflow debounce without a key', ConfigurationError, ['debounce of workflow "bad-def-', 'needs a key'], () =>
  define({ debounce: { period: '1s' } }),
);
add('defineWorkflow throttle.limit 0', ConfigurationError, ['throttle.limit of workflow "bad-def-', 'must be an integer from 1 to 1000000, got 0'], () =>
  define({ throttle: { limit: 0, period: '1s' } }),
);
add('defineWorkflow rateLimit.period -5', ConfigurationError, ['rateLimit.period of workflow "bad-def-', 'must be a duration > 0', 'got -5'], () =>
  define({ rateLimit: { limit: 1, period: -5 } }),
);
add('defineWorkflow priority 1.5', ConfigurationError, ['priority of workflow "bad-def-', 'must be an integer from -1000 to 1000, got 1.5'], () =>
  define({ priority: 1.5 }),
);
add('defineWorkflow concurrency.limit 0', ConfigurationError, ['concurrency.limit of workflow "bad-def-', 'must be an integer from 1 to 1000000, got 0'], () =>
  define({ concurrency: { key: 'k', limit: 0 } }),
);
add('defineWorkflow concurrency without a key', ConfigurationError, ['concurrency of workflow "bad-def-', 'must be { key, limit }'], () =>
  define({ concurrency: { limit: 2 } }),
);
add('defineWorkflow concurrency.scope "tenant"', ConfigurationError, ['concurrency.scope of workflow "bad-def-', "must be 'workflow' or 'queue'"], () =>
  define({ concurrency: { key: 'k', limit: 2, scope: 'tenant' } }),
);
add('defineWorkflow batch.maxSize 0', ConfigurationError, ['batch.maxSize of workflow "bad-def-', 'must be an integer from 1 to 1000, got 0'], () =>
  define({ event: [{ name: 'order.paid' }], batch: { maxSize: 0, timeout: '1s' } }),
);
add('defineWorkflow batch without an event', ConfigurationError, ['batch of workflow "bad-def-', 'batches the events that start it, and it has none'], () =>
  define({ batch: { maxSize: 10, timeout: '1s' } }),
);
add('defineWorkflow mutex ""', ConfigurationError, ['mutex of workflow "bad-def-', 'must be a non-empty string', 'got ""'], () => define({ mutex: '' }));
add('defineWorkflow mutex with a newline', ConfigurationError, ['mutex of workflow "bad-def-', 'must not contain control characters', 'got "a\\nb"'], () =>
  define({ mutex: 'a\nb' }),
);
add(
  'defineWorkflow unknown option "maxAtempts"',
  ConfigurationError,
  ['Unknown option "maxAtempts" in the options of workflow "bad-def-', 'Did you mean "maxAttempts"?'],
  () => define({ maxAtempts: 3 }),
);
add(
  'defineWorkflow unknown option in retries',
  ConfigurationError,
  ['Unknown option "maxAttempt" in retries of the options of workflow', 'Did you mean "maxAttempts"?'],
  () => define({ retries: { maxAttempt: 3 } }),
);
add(
  'defineWorkflow unknown option in throttle',
  ConfigurationError,
  ['Unknown option "limt" in throttle of the options of workflow', 'Did you mean "limit"?'],
  () => define({ throttle: { limt: 1, period: '1s' } }),
);
add(
  'defineWorkflow unknown option in a cron trigger',
  ConfigurationError,
  ['Unknown option "timeZone" in cron[0] of the options of workflow', 'Did you mean "timezone"?'],
  () => define({ cron: [{ expression: '* * * * *', timeZone: 'UTC' }] }),
);
add('defineWorkflow cron expression "not a cron"', InvalidCronError, ['Cron expression "not a cron" of workflow "bad-def-', 'is invalid'], () =>
  define({ cron: [{ expression: 'not a cron' }] }),
);
add('defineWorkflow cron timezone "Mars/Base"', InvalidCronError, ['Cron expression "0 * * * *" with time zone "Mars/Base" of workflow'], () =>
  define({ cron: [{ expression: '0 * * * *', timezone: 'Mars/Base' }] }),
);
add('defineWorkflow cron id used twice', ConfigurationError, ['Cron id "nightly" is used twice in workflow'], () =>
  define({
    cron: [
      { id: 'nightly', expression: '0 2 * * *' },
      { id: 'nightly', expression: '0 3 * * *' },
    ],
  }),
);
add(
  'defineWorkflow event trigger and a mutex function',
  ConfigurationError,
  ['has event triggers and computes a mutex, concurrency, debounce, throttle or rate-limit key with a function'],
  () => define({ event: [{ name: 'order.paid' }], mutex: (input: { id: string }) => input.id }),
);
add('defineWorkflow event name "a b"', ConfigurationError, ['Event name "a b" of workflow "bad-def-', 'is invalid'], () =>
  define({ event: [{ name: 'a b' }] }),
);

// ---------------------------------------------------------------------------------------------
// Run options: client.start and runByName
// ---------------------------------------------------------------------------------------------
const RUN_AT = 'runAt must be a valid Date or epoch milliseconds at most 10 years from now';
const IDEM_LENGTH = 'idempotencyKey must be a string of 1 to 512 characters';
const TTL = 'must be a duration > 0 and at most 10 years';
add('start priority 5000', ConfigurationError, ['priority of the run options must be an integer from -1000 to 1000, got 5000'], () =>
  start({}, { priority: 5000 }),
);
add('start runAt 1e20', ConfigurationError, [RUN_AT, 'got 100000000000000000000'], () => start({}, { runAt: 1e20 }));
add('start runAt 11 years ahead', ConfigurationError, [RUN_AT], () => start({}, { runAt: new Date(Date.now() + ELEVEN_YEARS_MS) }));
add('start runAt NaN', ConfigurationError, [RUN_AT, 'got NaN'], () => start({}, { runAt: NaN }));
add('start runAt new Date("x")', ConfigurationError, [RUN_AT, 'got an invalid Date'], () => start({}, { runAt: new Date('x') }));
add('start idempotencyKey ""', ConfigurationError, ['idempotencyKey is an empty string'], () => start({}, { idempotencyKey: '' }));
add('start idempotencyKey of 513 characters', ConfigurationError, [IDEM_LENGTH, '(a string of 513 characters)'], () =>
  start({}, { idempotencyKey: 'k'.repeat(513) }),
);
add('start idempotencyKey of 1 MiB', ConfigurationError, [IDEM_LENGTH, `(a string of ${MiB} characters)`], () =>
  start({}, { idempotencyKey: 'k'.repeat(MiB) }),
);
add('start idempotencyKey 42', ConfigurationError, [IDEM_LENGTH, 'got 42'], () => start({}, { idempotencyKey: 42 }));
add('start idempotencyTtl 0', ConfigurationError, [TTL, 'got 0'], () => start({}, { idempotencyTtl: 0 }));
add('start idempotencyTtl -1', ConfigurationError, [TTL, 'got -1'], () => start({}, { idempotencyTtl: -1 }));
add('start idempotencyWindow "0s"', ConfigurationError, ['idempotencyWindow of the start options', TTL, 'got "0s"'], () =>
  start({}, { idempotencyWindow: '0s' }),
);
add(
  'start idempotencyTtl "1d" (the deprecated name counts seconds)',
  ConfigurationError,
  ['idempotencyTtl of the start options must be a number', 'use idempotencyWindow'],
  () => start({}, { idempotencyTtl: '1d' }),
);
add('start queueOverride "a b"', ConfigurationError, ['queueOverride must not contain whitespace', 'got "a b"'], () => start({}, { queueOverride: 'a b' }));
add('start queueOverride "q*"', ConfigurationError, ['queueOverride must not contain "*"', 'got "q*"'], () => start({}, { queueOverride: 'q*' }));
add('start unknown option "runat"', ConfigurationError, ['Unknown option "runat" in run options', 'Did you mean "runAt"?'], () => start({}, { runat: 5 }));
add('runByName unknown option "runat"', ConfigurationError, ['Unknown option "runat" in run options', 'Did you mean "runAt"?'], () =>
  engine.client.runByName('plain', {}, bad({ runat: 5 })),
);
add('runByName idempotencyKey ""', ConfigurationError, ['idempotencyKey is an empty string'], () =>
  engine.client.runByName('plain', {}, { idempotencyKey: '' }),
);
add('runByName (workflow only in Redis) runAt NaN', ConfigurationError, [RUN_AT, 'got NaN'], () => engine.client.runByName('not-here', {}, { runAt: NaN }));
add('runByName (workflow only in Redis) idempotencyTtl 0', ConfigurationError, [TTL, 'got 0'], () =>
  engine.client.runByName('not-here', {}, { idempotencyTtl: 0 }),
);
add('runByName name ""', ConfigurationError, ['runByName needs a workflow name, got ""'], () => engine.client.runByName('', {}));
add('runByName unregistered workflow', UnknownWorkflowError, ['Workflow "no-such-workflow" is not registered'], () =>
  engine.client.runByName('no-such-workflow', {}),
);
add(
  'start idempotencyKey reused with another input',
  IdempotencyConflictError,
  ['Idempotency key "same-key" of workflow "plain" is already used by run'],
  async () => {
    await start({ n: 1 }, { idempotencyKey: 'same-key' });
    return start({ n: 2 }, { idempotencyKey: 'same-key' });
  },
);

// ---------------------------------------------------------------------------------------------
// Inputs that JSON would change
// ---------------------------------------------------------------------------------------------
const INPUT = 'Input for workflow "plain" is invalid: ';
const cycle: Record<string, unknown> = { name: 'loop' };
cycle.self = cycle;
const nestedCycle: { a: { list: Array<Record<string, unknown>> } } = { a: { list: [{}] } };
nestedCycle.a.list[0].back = nestedCycle.a;
add('input NaN', InputValidationError, [`${INPUT}$ is NaN (JSON would store null)`], () => start(NaN));
add('input { a: [1, NaN] }', InputValidationError, [`${INPUT}$.a[1] is NaN`], () => start({ a: [1, NaN] }));
add('input Infinity', InputValidationError, [`${INPUT}$.n is Infinity`], () => start({ n: Infinity }));
add('input -Infinity', InputValidationError, [`${INPUT}$.n is -Infinity`], () => start({ n: -Infinity }));
add('input BigInt', InputValidationError, [`${INPUT}$.big is a BigInt`], () => start({ big: 10n }));
add('input function', InputValidationError, [`${INPUT}$.f is a function`], () => start({ f: () => 1 }));
add('input Symbol', InputValidationError, [`${INPUT}$.s is a symbol`], () => start({ s: Symbol('s') }));
add('input Map', InputValidationError, [`${INPUT}$ is a Map`], () => start(new Map([['a', 1]])));
add('input Set', InputValidationError, [`${INPUT}$.tags is a Set`], () => start({ tags: new Set(['a']) }));
add('input Uint8Array', InputValidationError, [`${INPUT}$.bytes is a Uint8Array`], () => start({ bytes: new Uint8Array([1, 2]) }));
add('input [1, undefined]', InputValidationError, [`${INPUT}$[1] is undefined (JSON would store null)`], () => start([1, undefined]));
add('input with a cycle', InputValidationError, [`${INPUT}$.self is a circular reference to $`], () => start(cycle));
add('input with a nested cycle', InputValidationError, [`${INPUT}$.a.list[0].back is a circular reference to $.a`], () => start(nestedCycle));
add('input invalid Date', InputValidationError, [`${INPUT}$.at is an invalid Date`], () => start({ at: new Date('x') }));
add('input NaN through runByName', InputValidationError, [`${INPUT}$.n is NaN`], () => engine.client.runByName('plain', { n: NaN }));
add('input NaN of a workflow only in Redis', InputValidationError, ['Input for workflow "not-here" is invalid: $.n is NaN'], () =>
  engine.client.runByName('not-here', { n: NaN }),
);
add('input over maxPayloadBytes', PayloadTooLargeError, ['The input of workflow "plain" is 211 bytes, over the 100-byte limit'], () =>
  small.start(plain, { blob: 'x'.repeat(200) }),
);

// ---------------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------------
const EMIT_AT = 'emitAt must be a valid Date or epoch milliseconds at most 10 years from now';
add('emitEvent misspelt option "availableAt"', ConfigurationError, ['Unknown option "availableAt" in emitEvent options', 'emitAt'], () =>
  engine.client.emitEvent('order.paid', {}, bad({ availableAt: Date.now() + 1_000 })),
);
add('emitEvent unknown option "emitat"', ConfigurationError, ['Unknown option "emitat" in emitEvent options', 'Did you mean "emitAt"?'], () =>
  engine.client.emitEvent('order.paid', {}, bad({ emitat: Date.now() })),
);
add('scheduleEvent without emitAt', ConfigurationError, ['scheduleEvent needs an emitAt option'], () => engine.client.scheduleEvent('order.paid', {}, bad({})));
add('scheduleEvent emitAt 1e20', ConfigurationError, [EMIT_AT, 'got 100000000000000000000'], () =>
  engine.client.scheduleEvent('order.paid', {}, { emitAt: 1e20 }),
);
add('emitEvent emitAt 1e20', ConfigurationError, [EMIT_AT, 'got 100000000000000000000'], () => engine.client.emitEvent('order.paid', {}, { emitAt: 1e20 }));
add('emitEvent emitAt invalid Date', ConfigurationError, [EMIT_AT, 'got an invalid Date'], () =>
  engine.client.emitEvent('order.paid', {}, { emitAt: new Date('x') }),
);
add('emitEvent event ""', ConfigurationError, ['The event name of emitEvent "" is invalid'], () => engine.client.emitEvent('', {}));
add('emitEvent event "a|b"', ConfigurationError, ['The event name of emitEvent "a|b" is invalid'], () => engine.client.emitEvent('a|b', {}));
add('emitEvent event with a newline', ConfigurationError, ['The event name of emitEvent "a\\nb" is invalid'], () => engine.client.emitEvent('a\nb', {}));
add('emitEvent idempotencyKey ""', ConfigurationError, ['emitEvent idempotencyKey is an empty string'], () =>
  engine.client.emitEvent('order.paid', {}, { idempotencyKey: '' }),
);
add('emitEvent idempotencyTtl 0', ConfigurationError, [TTL, 'got 0'], () =>
  engine.client.emitEvent('order.paid', {}, { idempotencyKey: 'k', idempotencyTtl: 0 }),
);
add('emitEvent payload with NaN', OutputSerializationError, ['The payload of event "order.paid" cannot be stored as JSON: $.total is NaN'], () =>
  engine.client.emitEvent('order.paid', { total: NaN }),
);
add('emitEvent payload over maxPayloadBytes', PayloadTooLargeError, ['The payload of event "order.paid" is', 'over the 100-byte limit'], () =>
  small.emitEvent('order.paid', { blob: 'x'.repeat(200) }),
);

// ---------------------------------------------------------------------------------------------
// Reading, canceling, waiting, registering
// ---------------------------------------------------------------------------------------------
add('listRuns limit -1', ConfigurationError, ['listRuns limit must be an integer from 0 to 10000, got -1'], () => engine.client.listRuns({ limit: -1 }));
add('listRuns limit 1.5', ConfigurationError, ['listRuns limit must be an integer from 0 to 10000, got 1.5'], () => engine.client.listRuns({ limit: 1.5 }));
add('listRuns limit 1e20', ConfigurationError, ['listRuns limit', '100000000000000000000'], () => engine.client.listRuns({ limit: 1e20 }));
add('listRuns offset NaN', ConfigurationError, ['listRuns offset must be an integer from 0 to 1000000000, got NaN'], () =>
  engine.client.listRuns({ offset: NaN }),
);
add('listRuns offset 1e20 (of one workflow)', ConfigurationError, ['listRuns offset', '100000000000000000000'], () =>
  engine.client.listRuns({ workflow: 'plain', offset: 1e20 }),
);
add('listRuns status "done"', ConfigurationError, ['listRuns status must be one of', 'got "done"'], () => engine.client.listRuns({ status: bad('done') }));
add('listRuns unknown option "stauts"', ConfigurationError, ['Unknown option "stauts" in listRuns options', 'Did you mean "status"?'], () =>
  engine.client.listRuns(bad({ stauts: 'failed' })),
);
add('getStats minutes 0', ConfigurationError, ['getStats minutes must be an integer from 1 to 1440, got 0'], () => engine.client.getStats({ minutes: 0 }));
add('getStats minutes 1.5', ConfigurationError, ['getStats minutes must be an integer from 1 to 1440, got 1.5'], () =>
  engine.client.getStats({ minutes: 1.5 }),
);
add('getStats unknown option "minute"', ConfigurationError, ['Unknown option "minute" in getStats options', 'Did you mean "minutes"?'], () =>
  engine.client.getStats(bad({ minute: 5 })),
);
add('cancelRun unknown option "reasn"', ConfigurationError, ['Unknown option "reasn" in cancelRun options', 'Did you mean "reason"?'], () =>
  engine.client.cancelRun('no-such-run', bad({ reasn: 'dup' })),
);
add('cancelRun reason ""', ConfigurationError, ['cancelRun reason must be a non-empty string', 'got ""'], () =>
  engine.client.cancelRun('no-such-run', { reason: '' }),
);
add("result({ timeout: 'soon' })", ConfigurationError, ['result() timeout must be a duration >= 0 and at most 24 days', 'got "soon"'], () =>
  engine.client.handle('no-such-run').result({ timeout: 'soon' }),
);
add('result({ timeoutMs: -1 })', ConfigurationError, ['result() timeoutMs must be a duration >= 0 and at most 24 days', 'got -1'], () =>
  engine.client.handle('no-such-run').result({ timeoutMs: -1 }),
);
add('result({ timeoutMs: NaN })', ConfigurationError, ['result() timeoutMs must be a duration >= 0 and at most 24 days', 'got NaN'], () =>
  engine.client.handle('no-such-run').result({ timeoutMs: NaN }),
);
// On a run that already ended, so that a wrongly accepted timeout ends at the first read.
add('result({ timeoutMs: 1e20 })', ConfigurationError, ['result() timeoutMs', '100000000000000000000'], async () => {
  const handle = await start({ ended: true });
  await handle.result({ timeoutMs: 5_000 });
  return handle.result({ timeoutMs: 1e20 });
});
add('result({ timout: 5 })', ConfigurationError, ['Unknown option "timout" in result() options', 'Did you mean "timeout"?'], () =>
  engine.client.handle('no-such-run').result(bad({ timout: 5 })),
);
add('syncRegistry owner ""', ConfigurationError, ['syncRegistry needs an owner'], () => engine.client.syncRegistry(new WorkflowRegistry(), { owner: '' }));
add('syncRegistry owner with a newline', ConfigurationError, ['owner', '"a\\nb"'], () => engine.client.syncRegistry(new WorkflowRegistry(), { owner: 'a\nb' }));
add('syncRegistry unknown option "prun"', ConfigurationError, ['Unknown option "prun" in syncRegistry options', 'Did you mean "prune"?'], () =>
  engine.client.syncRegistry(new WorkflowRegistry(), bad({ owner: 'bad-inputs-sync', prun: false })),
);
const PRUNE_WORKFLOW = 'prune workflow must be a workflow name, got';
const WORKFLOW_RULE = 'Use 1-200 letters, digits, ".", ":", "-", "_" or "/", starting with a letter or digit.';
add('prune workflow ""', ConfigurationError, [`${PRUNE_WORKFLOW} "".`], () => engine.client.prune({ olderThan: '1d', workflow: '' }));
add('prune workflow "a b"', ConfigurationError, [`${PRUNE_WORKFLOW} "a b". ${WORKFLOW_RULE}`], () => engine.client.prune({ olderThan: '1d', workflow: 'a b' }));
add('prune workflow "a|b"', ConfigurationError, [`${PRUNE_WORKFLOW} "a|b".`], () => engine.client.prune({ olderThan: '1d', workflow: 'a|b' }));
add('prune workflow "*"', ConfigurationError, [`${PRUNE_WORKFLOW} "*".`], () => engine.client.prune({ olderThan: '1d', workflow: '*' }));
add('prune workflow 42', ConfigurationError, [`${PRUNE_WORKFLOW} 42.`], () => engine.client.prune({ olderThan: '1d', workflow: bad(42) }));
add('prune workflow of 201 characters', ConfigurationError, [PRUNE_WORKFLOW, '(a string of 201 characters)'], () =>
  engine.client.prune({ olderThan: '1d', workflow: 'w'.repeat(201) }),
);
// Redis down: each of these was checked only after the first-call check, so it surfaced as RedisUnavailableError.
add('Redis down: start idempotencyKey ""', ConfigurationError, ['idempotencyKey is an empty string'], () => down.start(plain, {}, { idempotencyKey: '' }));
add('Redis down: runByName idempotencyKey of 513 characters', ConfigurationError, [IDEM_LENGTH], () =>
  down.runByName('elsewhere', {}, { idempotencyKey: 'k'.repeat(513) }),
);
add('Redis down: emitEvent idempotencyKey ""', ConfigurationError, ['emitEvent idempotencyKey is an empty string'], () =>
  down.emitEvent('order.paid', {}, { idempotencyKey: '' }),
);
add('Redis down: emitEvent emitAt 1e20', ConfigurationError, [EMIT_AT, 'got 100000000000000000000'], () => down.emitEvent('order.paid', {}, { emitAt: 1e20 }));
add('Redis down: emitEvent payload with NaN', OutputSerializationError, ['The payload of event "order.paid" cannot be stored as JSON: $.total is NaN'], () =>
  down.emitEvent('order.paid', { total: NaN }),
);
add('Redis down: scheduleEvent idempotencyTtl 0', ConfigurationError, [TTL, 'got 0'], () =>
  down.scheduleEvent('order.paid', {}, { emitAt: Date.now() + 1_000, idempotencyKey: 'k', idempotencyTtl: 0 }),
);
add('Redis down: prune workflow "a b"', ConfigurationError, [`${PRUNE_WORKFLOW} "a b".`], () => down.prune({ olderThan: '1d', workflow: 'a b' }));
add('Redis down: schedule every 10 ms', ConfigurationError, ['every'], () => down.schedule('s', { workflow: 'plain', every: 10 }));

/** A registry with one workflow that sets no maxConcurrency, so `defaultMaxConcurrency` applies. */
const syncWithDefault = (defaultMaxConcurrency: number) => {
  const registry = new WorkflowRegistry();
  registry.define('sync-default-limit', {}, () => null);
  return engine.client.syncRegistry(registry, { owner: 'bad-inputs-sync', defaultMaxConcurrency });
};
add('syncRegistry defaultMaxConcurrency 0', ConfigurationError, ['defaultMaxConcurrency', 'got 0'], () => syncWithDefault(0));
add('syncRegistry defaultMaxConcurrency NaN', ConfigurationError, ['defaultMaxConcurrency', 'got NaN'], () => syncWithDefault(NaN));

// ---------------------------------------------------------------------------------------------
// The step API inside a running workflow
// ---------------------------------------------------------------------------------------------
const STEP_NAME = 'The step name of step.run must not contain "#" or "|"';
addStep('step.run name "charge#2"', ConfigurationError, [STEP_NAME, 'got "charge#2"'], (step) => step.run('charge#2', () => 1));
addStep('step.run name "a|b"', ConfigurationError, [STEP_NAME, 'got "a|b"'], (step) => step.run({ name: 'a|b' }, () => 1));
addStep('step.run name ""', ConfigurationError, ['step.run needs a non-empty name'], (step) => step.run('', () => 1));
addStep('step.run name with a newline', ConfigurationError, ['The step name of step.run must not contain control characters', 'got "a\\nb"'], (step) =>
  step.run('a\nb', () => 1),
);
addStep('step.run unknown option "timout"', ConfigurationError, ['Unknown option "timout" in step.run options', 'Did you mean "timeout"?'], (step) =>
  step.run(bad({ name: 's', timout: 5 }), () => 1),
);
addStep('step.run timeout "0s"', ConfigurationError, ['timeout of step.run must be a duration > 0', 'got "0s"'], (step) =>
  step.run({ name: 's', timeout: '0s' }, () => 1),
);
addStep('step.run timeoutMs -1', ConfigurationError, ['timeoutMs of step.run must be a duration > 0', 'got -1'], (step) =>
  step.run({ name: 's', timeoutMs: -1 }, () => 1),
);
addStep('step.run timeoutMs NaN', ConfigurationError, ['timeoutMs of step.run must be a duration > 0', 'got NaN'], (step) =>
  step.run({ name: 's', timeoutMs: NaN }, () => 1),
);
const WAIT = 'sleep target of step "w" must be';
addStep('step.waitFor 1e20', ConfigurationError, [WAIT, 'at most 10 years', 'got 100000000000000000000'], (step) => step.sleep('w', 1e20));
addStep('step.waitFor -5', ConfigurationError, [WAIT, 'got -5'], (step) => step.sleep('w', -5));
addStep('step.waitFor "abc"', ConfigurationError, [WAIT, 'got "abc"'], (step) => step.sleep('w', 'abc'));
addStep('step.waitFor new Date(NaN)', ConfigurationError, [WAIT, 'got an invalid Date'], (step) => step.sleep('w', new Date(NaN)));
addStep('step.waitFor a Date 11 years ahead', ConfigurationError, [WAIT, 'at most 10 years from now'], (step) =>
  step.sleep('w', new Date(Date.now() + ELEVEN_YEARS_MS)),
);
addStep('step.waitFor name "w#2"', ConfigurationError, ['The step name of step.waitFor must not contain "#" or "|"', 'got "w#2"'], (step) =>
  step.sleep('w#2', 10),
);
addStep('step.runWorkflow idempotencyKey ""', ConfigurationError, ['idempotencyKey of step "c" is an empty string'], (step) =>
  step.runWorkflow({ name: 'c', idempotencyKey: '' }, plain, {}),
);
addStep('step.runWorkflow runAt NaN', ConfigurationError, [RUN_AT, 'got NaN'], (step) => step.runWorkflow({ name: 'c', runAt: NaN }, plain, {}));
addStep(
  'step.runWorkflow unknown option "idempotencykey"',
  ConfigurationError,
  ['Unknown option "idempotencykey" in step.runWorkflow options', 'Did you mean "idempotencyKey"?'],
  (step) => step.runWorkflow(bad({ name: 'c', idempotencykey: 'k' }), plain, {}),
);
addStep('step.runWorkflow unregistered workflow', UnknownWorkflowError, ['Workflow "no-such-child" is not registered'], (step) =>
  step.runWorkflow('c', 'no-such-child', {}),
);
addStep('step.runWorkflow child input with NaN', InputValidationError, ['Input for workflow "plain" is invalid: $.n is NaN'], (step) =>
  step.runWorkflow('c', plain, { n: NaN }),
);
addStep('step.emitWorkflow idempotencyTtl 0', ConfigurationError, [TTL, 'got 0'], (step) =>
  step.emitWorkflow({ name: 'c', idempotencyKey: 'k', idempotencyTtl: 0 }, plain, {}),
);
addStep('step.emitEvent event "a|b"', ConfigurationError, ['The event name of step "e" "a|b" is invalid', 'as in the event triggers of workflows'], (step) =>
  step.emitEvent('e', 'a|b', {}),
);
addStep('step.emitEvent emitAt 1e20', ConfigurationError, [EMIT_AT, 'got 100000000000000000000'], (step) =>
  step.emitEvent({ name: 'e', emitAt: 1e20 }, 'order.paid', {}),
);
addStep(
  'step.emitEvent payload with NaN',
  OutputSerializationError,
  ['The payload of event "order.paid" (step "e") cannot be stored as JSON: $.total is NaN'],
  (step) => step.emitEvent('e', 'order.paid', { total: NaN }),
);
addStep('step output NaN', OutputSerializationError, ['The output of step "s" cannot be stored as JSON: $ is NaN'], (step) => step.run('s', () => NaN));
addStep('step output BigInt', OutputSerializationError, ['The output of step "s" cannot be stored as JSON: $.id is a BigInt'], (step) =>
  step.run('s', () => ({ id: 1n })),
);
addStep('step output Map', OutputSerializationError, ['The output of step "s" cannot be stored as JSON: $.byId is a Map'], (step) =>
  step.run('s', () => ({ byId: new Map([['a', 1]]) })),
);
addStep('step output over maxPayloadBytes', PayloadTooLargeError, ['The output of step "s" is', `over the ${MiB}-byte limit`], (step) =>
  step.run('s', () => 'x'.repeat(MiB + 1)),
);
addStep(
  'workflow output with Infinity',
  OutputSerializationError,
  ['The output of workflow "step-case-', 'cannot be stored as JSON: $.ratio is Infinity'],
  async (step) => {
    await step.run('s', () => 1);
    return { ratio: Infinity };
  },
);
addStep(
  'retries.delay function returning NaN',
  ConfigurationError,
  ['retries.delay of workflow "step-case-', 'must be a duration >= 0', 'got NaN'],
  () => {
    throw new Error('first attempt fails');
  },
  { maxAttempts: 2, retries: { delay: () => NaN } },
);

// ---------------------------------------------------------------------------------------------
// Versions, timeouts, sagas, races and operator actions
// ---------------------------------------------------------------------------------------------
const VERSION = 'must be a positive integer (1, 2, 3, ...)';
add('defineWorkflow version 0', ConfigurationError, ['version of workflow "bad-def-', VERSION, 'got 0'], () => define({ version: 0 }));
add('defineWorkflow version 1.5', ConfigurationError, ['version of workflow "bad-def-', VERSION, 'got 1.5'], () => define({ version: 1.5 }));
add('defineWorkflow version "2"', ConfigurationError, ['version of workflow "bad-def-', VERSION, 'got "2"'], () => define({ version: '2' }));
add(
  'defineWorkflow onNonDeterminism "ignore"',
  ConfigurationError,
  ['onNonDeterminism of workflow "bad-def-', "must be 'fail' or 'retry-latest'", 'got "ignore"'],
  () => define({ onNonDeterminism: 'ignore' }),
);
add(
  'defineWorkflow queue "orders@v2"',
  ConfigurationError,
  ['queue of workflow "bad-def-', 'must not contain "@"', '"<queue>@v<N>" is where runs of version N wait'],
  () => define({ queue: 'orders@v2' }),
);
const RUN_TIMEOUT = 'must be a duration > 0 and at most 10 years';
add('defineWorkflow timeout 0', ConfigurationError, ['timeout of workflow "bad-def-', RUN_TIMEOUT, 'got 0'], () => define({ timeout: 0 }));
add('defineWorkflow timeout "abc"', ConfigurationError, ['timeout of workflow "bad-def-', RUN_TIMEOUT, 'got "abc"'], () => define({ timeout: 'abc' }));
add('defineWorkflow timeout 1e20', ConfigurationError, ['timeout of workflow "bad-def-', RUN_TIMEOUT, 'got 100000000000000000000'], () =>
  define({ timeout: 1e20 }),
);
add('start timeout 0', ConfigurationError, ['timeout of the run options', RUN_TIMEOUT, 'got 0'], () => start({}, { timeout: 0 }));
add('runByName timeout "abc"', ConfigurationError, ['timeout of the run options', RUN_TIMEOUT, 'got "abc"'], () =>
  engine.client.runByName('plain', {}, { timeout: 'abc' }),
);
add('start version 0', ConfigurationError, ['The run option version', VERSION, 'got 0'], () => start({}, { version: 0 }));
add('runByName version 1.5', ConfigurationError, ['The run option version', VERSION, 'got 1.5'], () => engine.client.runByName('plain', {}, { version: 1.5 }));
add('listRuns version 0', ConfigurationError, ['listRuns version', VERSION, 'got 0'], () => engine.client.listRuns({ workflow: 'plain', version: 0 }));
add('listRuns version without a workflow', ConfigurationError, ['listRuns version needs a workflow', '{ workflow: "checkout", version: 1 }'], () =>
  engine.client.listRuns({ version: 2 }),
);
add('countRuns version 1.5', ConfigurationError, ['countRuns version', VERSION, 'got 1.5'], () => engine.client.countRuns({ workflow: 'plain', version: 1.5 }));
add(
  'listRuns status "compensated" (a field, not a status)',
  ConfigurationError,
  ['listRuns status must be one of', 'compensation_failed', 'got "compensated"'],
  () => engine.client.listRuns({ status: bad('compensated') }),
);
add('cancelRun compensate "yes"', ConfigurationError, ['cancelRun compensate must be true or false', 'got "yes"'], () =>
  engine.client.cancelRun('no-such-run', { compensate: bad('yes') }),
);
add('terminate reason ""', ConfigurationError, ['terminate reason must be a non-empty string', 'got ""'], () =>
  engine.client.terminate('no-such-run', { reason: '' }),
);
add('terminate unknown option "reasn"', ConfigurationError, ['Unknown option "reasn" in terminate options', 'Did you mean "reason"?'], () =>
  engine.client.terminate('no-such-run', bad({ reasn: 'stuck' })),
);
add('deleteRun force "yes"', ConfigurationError, ['deleteRun option "force" must be a boolean', 'got "yes"'], () =>
  engine.client.deleteRun('no-such-run', { force: bad('yes') }),
);
add('deleteRun unknown option "forse"', ConfigurationError, ['Unknown option "forse" in deleteRun options', 'Did you mean "force"?'], () =>
  engine.client.deleteRun('no-such-run', bad({ forse: true })),
);
add('startWorker runtime.maxRecoveries 1.5', ConfigurationError, ['runtime.maxRecoveries must be an integer from 1 to', 'got 1.5'], () =>
  engine.worker({ runtime: { maxRecoveries: 1.5 } }),
);
const HEARTBEAT = 'heartbeatTimeout of step "s" must be a duration > 0 and at most 24 days';
addStep('step.run heartbeatTimeout 0', ConfigurationError, [HEARTBEAT, 'got 0'], (step) => step.run({ name: 's', heartbeatTimeout: 0 }, () => 1));
addStep('step.run heartbeatTimeout 1e20', ConfigurationError, [HEARTBEAT, 'got 100000000000000000000'], (step) =>
  step.run({ name: 's', heartbeatTimeout: 1e20 }, () => 1),
);
addStep('step.run compensate "refund" (not a function)', ConfigurationError, ['The compensate option of step "s" must be a function', 'got string'], (step) =>
  step.run({ name: 's', compensate: bad('refund') }, () => 1),
);
addStep('step.run compensateRetries without compensate', ConfigurationError, ['Step "s" has compensateRetries but no compensate function'], (step) =>
  step.run({ name: 's', compensateRetries: { maxAttempts: 2 } }, () => 1),
);
addStep(
  'step.run compensateRetries.maxAttempts 0',
  ConfigurationError,
  ['compensateRetries of step "s" maxAttempts must be an integer from 1 to', 'got 0'],
  (step) => step.run({ name: 's', compensate: () => undefined, compensateRetries: { maxAttempts: 0 } }, () => 1),
);
addStep('step.commit name ""', ConfigurationError, ['step.commit needs a non-empty name'], (step) => step.commit(''));
addStep('step.commit name "a|b"', ConfigurationError, ['The step name of step.commit must not contain "#" or "|"', 'got "a|b"'], (step) => step.commit('a|b'));
addStep('step.patched id ""', ConfigurationError, ['The id of step.patched must be a non-empty string', 'got ""'], (step) => step.patched(''));
addStep('step.patched id "a|b"', ConfigurationError, ['The id of step.patched must not contain "#" or "|"', 'got "a|b"'], (step) => step.patched('a|b'));
const RACE = 'step.waitForAny "race"';
addStep('step.waitForAny with no branches', ConfigurationError, [`${RACE} has no branches`], (step) => step.waitForAny('race', {}));
addStep('step.waitForAny branches null', ConfigurationError, [`${RACE} needs an object of branches`, 'got null'], (step) => step.waitForAny('race', bad(null)));
addStep('step.waitForAny branch 5 (not a branch)', ConfigurationError, [`Branch "a" of ${RACE} is 5, not a branch`, 'step.signal(name)'], (step) =>
  step.waitForAny('race', { a: bad(5) }),
);
addStep('step.timer 1e20 in a race', ConfigurationError, [`timer of branch "t" of ${RACE}`, 'at most 10 years', 'got 100000000000000000000'], (step) =>
  step.waitForAny('race', { t: step.timer(1e20) }),
);
addStep('step.timer "abc" in a race', ConfigurationError, [`timer of branch "t" of ${RACE}`, 'got "abc"'], (step) =>
  step.waitForAny('race', { t: step.timer('abc') }),
);
addStep('step.child onLose "keep"', ConfigurationError, ["onLose of step.child must be 'cancel' or 'abandon'", 'got "keep"'], (step) =>
  step.waitForAny('race', { c: step.child(plain, {}, { onLose: bad('keep') }) }),
);

// ---------------------------------------------------------------------------------------------
// RetryAfterError
// ---------------------------------------------------------------------------------------------
const RETRY_AFTER = 'RetryAfterError delay';
add('new RetryAfterError(msg, -1)', TypeError, [RETRY_AFTER, '-1 is not valid'], () => new RetryAfterError('later', -1));
add('new RetryAfterError(msg, NaN)', TypeError, [RETRY_AFTER, 'NaN is not valid'], () => new RetryAfterError('later', NaN));
add('new RetryAfterError(msg, "abc")', TypeError, [RETRY_AFTER, '"abc" is not valid'], () => new RetryAfterError('later', 'abc'));
add('new RetryAfterError(msg, new Date("x"))', TypeError, [RETRY_AFTER, 'an invalid Date is not valid'], () => new RetryAfterError('later', new Date('x')));
add('new RetryAfterError(msg, 1e20)', TypeError, [RETRY_AFTER, '100000000000000000000 is not valid'], () => new RetryAfterError('later', 1e20));
add(
  'new RetryAfterError(msg, a Date 11 years ahead)',
  TypeError,
  [RETRY_AFTER, 'is not valid'],
  () => new RetryAfterError('later', new Date(Date.now() + ELEVEN_YEARS_MS)),
);

// ---------------------------------------------------------------------------------------------
// The issue's own example: a misspelt scheduleEvent option once fired the event at once.
// ---------------------------------------------------------------------------------------------
add('scheduleEvent misspelt option "availableAt" (no emitAt)', ConfigurationError, ['Unknown option "availableAt" in scheduleEvent options', 'emitAt'], () =>
  engine.client.scheduleEvent('order.paid', {}, bad({ availableAt: Date.now() + 60_000 })),
);
add('scheduleEvent misspelt option "availableAt" next to emitAt', ConfigurationError, ['Unknown option "availableAt" in scheduleEvent options', 'emitAt'], () =>
  engine.client.scheduleEvent('order.paid', {}, bad({ emitAt: Date.now() + 60_000, availableAt: Date.now() + 60_000 })),
);

// ---------------------------------------------------------------------------------------------

let tried = 0;
let named = 0;

/** Settles with what the call did: its value, or what it threw (synchronously or by rejecting). */
async function outcome(attempt: () => unknown): Promise<{ threw: true; error: unknown } | { threw: false; value: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`did not settle within ${CASE_TIMEOUT_MS} ms`)), CASE_TIMEOUT_MS);
  });
  try {
    const value = await Promise.race([Promise.resolve().then(attempt), hung]);
    return { threw: false, value };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('did not settle within')) throw error;
    return { threw: true, error };
  } finally {
    clearTimeout(timer);
  }
}

describe('bad inputs are rejected with a named error that names the option', () => {
  beforeAll(async () => {
    engine = new TestEngine();
    plain = engine.registry.define('plain', { maxConcurrency: Infinity }, ({ input }) => input);
    for (const { name, options, handler } of stepWorkflows) {
      engine.registry.define(name, { maxConcurrency: Infinity, ...options }, ({ step }) => handler({ step }));
    }
    small = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, maxPayloadBytes: 100 });
    const quiet = { log: () => undefined, warn: () => undefined, error: () => undefined };
    down = createClient({ url: 'redis://127.0.0.1:1', prefix: engine.prefix, registry: engine.registry, commandTimeoutMs: 500, logger: quiet });
    await engine.worker({ concurrency: 8 });
  });

  afterAll(async () => {
    await small?.close();
    // Its Redis never answers: drop the connection first, so that close() does not wait on a
    // command a wrongly accepted case left queued.
    down?.redis.disconnect();
    await down?.close();
    await engine?.close();
  });

  it.each(cases.map((c) => [c.what, c] as const))('%s', async (_what, c) => {
    tried++;
    const result = await outcome(c.attempt);
    if (!result.threw) {
      throw new Error(`${c.what}: accepted (returned ${typeof result.value}), expected ${c.error.name} naming ${JSON.stringify(c.message)}.`);
    }
    const error = result.error as Error;
    expect(error).toBeInstanceOf(c.error);
    expect(error.name).toBe(c.error.name);
    for (const part of c.message) expect(error.message).toContain(part);
    named++;
  });

  describe('ids that are not run ids', () => {
    it('read as no run, no steps, and cannot be canceled', async () => {
      const handle = await engine.client.start(plain, { ok: true });
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ ok: true });
      const realId = handle.id;
      expect(await engine.client.getRun(realId)).toMatchObject({ status: 'succeeded' });
      for (const id of [`${realId}:children`, `${realId}:waiters`, `${realId}:`, '', '\n', `${realId}\n`, 'a'.repeat(5_000), '*']) {
        expect(await engine.client.getRun(id)).toBeNull();
        expect(await engine.client.getRunSteps(id)).toEqual([]);
        expect(await engine.client.getRunChildren(id)).toEqual([]);
        expect(await engine.client.cancelRun(id)).toBe(false);
      }
      expect(await engine.client.getRun(realId)).toMatchObject({ status: 'succeeded' });
    });
  });

  describe('afterwards', () => {
    it('every case threw its named error, and the store holds no stranded run nor an index entry without its run', async () => {
      const { redis } = engine;
      const base = engine.client.keys.base;
      const scan = async (pattern: string) => {
        const keys: string[] = [];
        let cursor = '0';
        do {
          const [next, batch] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
          cursor = next;
          keys.push(...batch);
        } while (cursor !== '0');
        return [...new Set(keys)];
      };
      const runKey = (id: string) => `${base}run:${id}`;

      // Every run ended: the worker finishes what the cases started, and none was meant to wait.
      const ended = (status: string) => ['succeeded', 'failed', 'canceled'].includes(status);
      const statuses = async () => {
        const out: Array<[id: string, status: string]> = [];
        for (const key of await scan(`${base}run:*`)) out.push([key.slice(`${base}run:`.length), (await redis.hget(key, 'status')) ?? '(no status field)']);
        return out;
      };
      await eventually(async () => (await statuses()).every(([, status]) => ended(status)), 5_000).catch(() => undefined);
      const runs = await statuses();
      const stranded = runs.filter(([, status]) => !ended(status)).map(([id, status]) => `${id}: ${status}`);

      // Every index member has its run hash.
      const indexes = (await scan(`${base}*`)).filter((key) => {
        const rest = key.slice(base.length);
        return (
          /^status:[^:]+$/.test(rest) ||
          rest === 'leases' ||
          /^wf:.+:(runs|active|parked)$/.test(rest) ||
          /^q:.+:(ready|scheduled)$/.test(rest) ||
          /^wfstatus:[^:]+:.+$/.test(rest) ||
          rest.startsWith('mutex-parked:') ||
          rest.startsWith('debounce:')
        );
      });
      const dangling: string[] = [];
      for (const key of indexes) {
        const type = await redis.type(key);
        // A debounce key is a string: the id of the run it collects calls into.
        const ids =
          type === 'zset'
            ? await redis.zrange(key, 0, '-1')
            : type === 'list'
              ? await redis.lrange(key, 0, -1)
              : type === 'string'
                ? [(await redis.get(key))!]
                : [];
        for (const id of ids) if (!(await redis.exists(runKey(id)))) dangling.push(`${key} -> ${id}`);
      }
      expect({ stranded, dangling }).toEqual({ stranded: [], dangling: [] });
      // The check looked at something: the failed step-API runs and their index.
      expect(runs.length).toBeGreaterThan(stepWorkflows.length);
      expect(indexes.some((key) => key.endsWith('status:failed'))).toBe(true);
      expect(indexes.some((key) => key.startsWith(`${base}wfstatus:failed:`))).toBe(true);

      process.stdout.write(`${tried} bad inputs tried, ${named} named errors\n`);
      expect(tried).toBe(cases.length);
      expect(named).toBe(tried);
      expect(tried).toBeGreaterThanOrEqual(90);
      // docs/edges.md quotes this figure: adding a case means updating it there.
      expect(readFileSync(join(__dirname, '..', '..', 'docs', 'edges.md'), 'utf8')).toContain(`**${tried} bad inputs tried, ${named} named errors**`);
    });
  });
});
