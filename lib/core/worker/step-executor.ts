import { dueAt } from '../definition/duration';
import { checkHeartbeatTimeout, checkStepRetry, RUN_STEP_OPTION_KEYS } from '../definition/option-checks';
import { stepRetryDelayMs } from '../definition/retry';
import type { RunStepOptions, StepRunContext } from '../definition/workflow';
import { CanceledError, ConfigurationError, isRetryable, RetryAfterError, StepHeartbeatTimeoutError, TimeoutError } from '../errors';
import { encodeJson, serializeError } from '../store/serialization';
import {
  COMPENSATION_FIELD_PREFIX,
  COMPENSATION_PENDING,
  encodeFailureRecord,
  encodeSuccessRecord,
  encodeTriesRecord,
  parseTriesRecord,
  TRIES_FIELD_PREFIX,
  type StepTry,
} from '../store/step-record';
import { SANDBOX_CALL, sandboxPool, sandboxSource, type SandboxCall } from './sandbox';
import { stopStep, type InflightStep, type RegisteredCompensation, type StepApiEntry, type StepHost } from './step-host';
import { SiblingStepFailedError, SuspendSignal } from './step-signals';

/** When the try that succeeded ran: the times its step record stores, so its tries record agrees. */
interface StepTimes {
  startedAt: number;
  finishedAt: number;
}

/** Default retries of a compensation: three tries, 1 s then 2 s apart. */
const DEFAULT_COMPENSATE_RETRIES = { maxAttempts: 3 };

/** A step retry waits at least this long (ms) in `scheduled`, freeing the worker slot; shorter ones wait in process. */
const SLOT_FREEING_RETRY_MS = 1_000;

const noop = () => undefined;

/** `step.run`. */
export const run: StepApiEntry<'run'> = (rt) => (options: RunStepOptions | string, fn: (ctx: never) => unknown) =>
  runStep(rt, options, fn as (ctx: StepRunContext) => unknown);

/** The step's function run in the sandbox's thread pool (`sandbox.ts`), checked first; `fn` itself without `sandbox: true`. */
function sandboxed<T>(rt: StepHost, name: string, opts: RunStepOptions, fn: (ctx: StepRunContext) => T | Promise<T>): (ctx: StepRunContext) => Promise<T> {
  if (typeof opts.sandbox !== 'boolean')
    throw new ConfigurationError(`The sandbox option of step "${name}" must be true or false, got ${typeof opts.sandbox}.`);
  if (!opts.sandbox) return async (ctx) => fn(ctx);
  if (opts.heartbeatTimeout !== undefined) {
    throw new ConfigurationError(
      `Step "${name}" has sandbox and heartbeatTimeout: a function in the sandbox cannot call heartbeat(). Give it a timeout instead.`,
    );
  }
  // A method called with arguments (@Step) runs as that method with them.
  const call = (fn as { [SANDBOX_CALL]?: SandboxCall })[SANDBOX_CALL];
  const source = sandboxSource(call?.fn ?? fn, `The function of step "${name}"`);
  const { runId, workflow, attempt } = rt.ctx;
  return (ctx) => sandboxPool().run(source, { runId, workflow, step: name, attempt, idempotencyKey: ctx.idempotencyKey }, ctx.signal, call?.args) as Promise<T>;
}

/**
 * `step.run`: the stored output on replay; else the function runs, try after try, under the step's
 * retry policy. A short retry delay waits in process; a long one stores the failed try and
 * suspends the run until it is due, freeing the worker slot.
 */
async function runStep<T>(rt: StepHost, options: RunStepOptions | string, fn: (ctx: StepRunContext) => T | Promise<T>): Promise<T> {
  const { ctx } = rt;
  const { opts, name, field, record, timeoutMs } = rt.replay.begin<RunStepOptions>('run', options, RUN_STEP_OPTION_KEYS);
  const compensable = registerCompensation(rt, name, opts);
  const heartbeatMs = opts.heartbeatTimeout === undefined ? undefined : checkHeartbeatTimeout(opts.heartbeatTimeout, `heartbeatTimeout of step "${name}"`);
  if (opts.sandbox !== undefined) fn = sandboxed(rt, name, opts, fn);
  if (record?.kind === 'succeeded') return record.output as T;
  const policy = opts.retries === undefined ? ctx.stepRetries : checkStepRetry(opts.retries, `retries of step "${name}"`);
  const triesField = TRIES_FIELD_PREFIX + name;
  const stored = rt.replay.stored.get(triesField);
  const tries = stored === undefined ? undefined : parseTriesRecord(ctx.runId, triesField, stored);
  let failures = tries?.failures ?? 0;
  let inAttempt = tries?.runAttempt === ctx.attempt ? tries.failuresInRunAttempt : 0;
  // The tries so far (a step that threw before), and the last error's JSON: kept in its tries record.
  const history: StepTry[] = tries?.tries ?? [];
  let lastError = tries === undefined ? '' : JSON.stringify(tries.lastError ?? null);
  // Woken before its retry was due (a sibling's wait ended first): wait again until it is.
  if (record?.kind === 'failed' && tries && tries.runAttempt === ctx.attempt && tries.retryAt > ctx.clock.now()) rt.suspend(tries.retryAt);
  for (;;) {
    await rt.ready();
    const startedAt = Date.now();
    const hook = { runId: ctx.runId, workflow: ctx.workflow, attempt: ctx.attempt, step: name };
    ctx.hooks.emit('onStepStart', hook);
    const span = ctx.span?.startStep({ step: name, stepAttempt: failures + 1 });
    try {
      const times: StepTimes = { startedAt, finishedAt: startedAt };
      const output = await (span
        ? span.activate(() => execute(rt, name, field, timeoutMs, heartbeatMs, fn, compensable, times))
        : execute(rt, name, field, timeoutMs, heartbeatMs, fn, compensable, times));
      span?.end({ outcome: 'succeeded' });
      ctx.hooks.emit('onStepComplete', { ...hook, output, durationMs: Date.now() - startedAt });
      // A step that threw before: the try that succeeded joins its tries (same batch as its record).
      if (failures > 0) {
        history.push({ ...times, attempt: ctx.attempt });
        const counts = { failures, runAttempt: ctx.attempt, failuresInRunAttempt: inAttempt, retryAt: 0 };
        rt.writer.record(triesField, encodeTriesRecord(counts, lastError, history));
      }
      return output;
    } catch (error) {
      if (error instanceof SiblingStepFailedError || error instanceof CanceledError || error instanceof SuspendSignal || ctx.stopReason()) {
        span?.end({ outcome: error instanceof SuspendSignal ? 'suspended' : 'canceled', suspended: error instanceof SuspendSignal || undefined });
        throw error;
      }
      failures++;
      inAttempt++;
      const retry = inAttempt < policy.maxAttempts && isRetryable(error);
      span?.end({ outcome: retry ? 'retry' : 'failed', error });
      ctx.hooks.emit('onStepFailed', { ...hook, error, willRetry: retry, durationMs: Date.now() - startedAt });
      const delay = !retry
        ? 0
        : error instanceof RetryAfterError
          ? Math.max(0, dueAt(error.delay, ctx.clock.now(), 'RetryAfterError delay') - ctx.clock.now())
          : stepRetryDelayMs(policy, inAttempt);
      const retryAt = retry && delay >= SLOT_FREEING_RETRY_MS ? ctx.clock.now() + delay : 0;
      lastError = serializeError(error);
      const { name: errorName, message } = JSON.parse(lastError) as { name: string; message: string };
      history.push({ startedAt, finishedAt: Date.now(), attempt: ctx.attempt, error: { name: errorName, message } });
      rt.writer.record(triesField, encodeTriesRecord({ failures, runAttempt: ctx.attempt, failuresInRunAttempt: inAttempt, retryAt }, lastError, history));
      if (!retry) rt.failAt(field, startedAt, error);
      if (retryAt === 0) {
        await pause(rt, delay);
        continue;
      }
      // A long wait frees the slot: the failed try is stored, and the run sleeps until retryAt.
      const finishedAt = Date.now();
      rt.writer.record(field, encodeFailureRecord(rt.replay.nextSeq(), ctx.attempt, finishedAt, finishedAt - startedAt, serializeError(error)));
      rt.suspend(retryAt);
    }
  }
}

/**
 * Checks a step's `compensate` option and keeps the function under the step's name, whether the
 * step runs now or is replayed: a failing run compensates from this map. True when it has one.
 */
function registerCompensation(rt: StepHost, name: string, opts: RunStepOptions): boolean {
  if (opts.compensate === undefined) {
    if (opts.compensateRetries !== undefined) {
      throw new ConfigurationError(`Step "${name}" has compensateRetries but no compensate function: add compensate, or drop compensateRetries.`);
    }
    return false;
  }
  if (typeof opts.compensate !== 'function') {
    throw new ConfigurationError(`The compensate option of step "${name}" must be a function (output, ctx) => ..., got ${typeof opts.compensate}.`);
  }
  const retries = checkStepRetry(opts.compensateRetries ?? DEFAULT_COMPENSATE_RETRIES, `compensateRetries of step "${name}"`);
  rt.compensations.set(name, { fn: opts.compensate as RegisteredCompensation['fn'], retries });
  return true;
}

/** Waits `ms` in process (a short step retry delay); rejects when the attempt must stop. */
function pause(rt: StepHost, ms: number): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const step: InflightStep = {
      reject: (reason) => {
        cancel();
        rt.inflight.delete(step);
        reject(reason);
      },
    };
    const cancel = rt.ctx.clock.setTimer(ms, () => {
      rt.inflight.delete(step);
      resolve();
    });
    rt.inflight.add(step);
  });
}

/**
 * Runs a step's function once; stores its record when it returns (the caller handles a throw).
 * With `heartbeatMs`, the try fails with `StepHeartbeatTimeoutError` once that long passes (real
 * time, like `timeoutMs`) without a `heartbeat()` call.
 */
async function execute<T>(
  rt: StepHost,
  name: string,
  field: string,
  timeoutMs: number | undefined,
  heartbeatMs: number | undefined,
  fn: (ctx: StepRunContext) => T | Promise<T>,
  compensable: boolean,
  times: StepTimes,
): Promise<T> {
  const { ctx } = rt;
  const startedAt = Date.now();
  times.startedAt = startedAt;
  const step: InflightStep = { reject: noop };
  let heartbeatTimer: NodeJS.Timeout | undefined;
  let running = false;
  const heartbeat =
    heartbeatMs === undefined
      ? noop
      : () => {
          if (!running) return;
          clearTimeout(heartbeatTimer);
          heartbeatTimer = setTimeout(() => stopStep(step, new StepHeartbeatTimeoutError(name, heartbeatMs)), heartbeatMs);
        };
  // The signal is created only if the step function reads it: most steps never do.
  const stepContext: StepRunContext = {
    get signal(): AbortSignal {
      return (step.controller ??= new AbortController()).signal;
    },
    heartbeat,
    idempotencyKey: `${ctx.runId}:${name}`,
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    const mock = ctx.stepMocks && (await ctx.stepMocks(ctx.runId, name));
    // A step runs only under a lease this worker surely holds: after a blocked event loop,
    // another worker may have taken the run over and stored this step already.
    const renewing = ctx.confirmLease();
    if (renewing) await renewing;
    const result = await new Promise<T>((resolve, reject) => {
      step.reject = reject;
      rt.inflight.add(step);
      if (timeoutMs !== undefined) timer = setTimeout(() => stopStep(step, new TimeoutError(`Step "${name}"`, timeoutMs)), timeoutMs);
      running = true;
      heartbeat();
      if (mock) {
        if ('output' in mock) resolve(mock.output as T);
        else reject(mock.error instanceof Error ? mock.error : new Error(String(mock.error)));
        return;
      }
      try {
        Promise.resolve(fn(stepContext)).then(resolve, reject);
      } catch (error) {
        reject(error);
      }
    });
    rt.inflight.delete(step);
    const encoded = encodeJson(result, `The output of step "${name}"`, ctx.maxPayloadBytes);
    const finishedAt = Date.now();
    times.finishedAt = finishedAt;
    const stored = ctx.payloads.seal(encoded, { kind: 'step', runId: ctx.runId });
    rt.writer.record(field, encodeSuccessRecord(rt.replay.nextSeq(), ctx.attempt, finishedAt, finishedAt - startedAt, stored));
    // In the same batch as the step's record: a stored step is never without its compensation.
    if (compensable) rt.writer.record(COMPENSATION_FIELD_PREFIX + name, COMPENSATION_PENDING);
    // What a replay would return: the value as stored (Dates as strings), a string escaped by encodeJson as itself.
    return (encoded === '' ? undefined : ctx.payloads.open(JSON.parse(encoded), { kind: 'step', runId: ctx.runId })) as T;
  } catch (error) {
    rt.inflight.delete(step);
    throw error;
  } finally {
    running = false;
    clearTimeout(timer);
    clearTimeout(heartbeatTimer);
  }
}
