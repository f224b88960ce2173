/**
 * What the step API takes and gives: the options of each step kind, a step's retry policy, the
 * context of a step function and of a compensation, and the branches of `step.waitForAny`.
 */
import type { Duration } from './duration-format';

/** Options of a durable step. */
export interface StepOptions {
  /** Unique within the run; a repeated name gets a `#2`, `#3`, ... suffix in call order. */
  name: string;
  /** Aborts the step's signal and fails the try with `TimeoutError` after this long (its `retries` then apply). @default no limit */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration: `'30s'` or ms); `timeoutMs` goes in the next minor version. */
  timeoutMs?: number;
}

/** Options of `step.run` (and `@Step`). `T` is the step's output. */
export interface RunStepOptions<T = any> extends StepOptions {
  /**
   * Retries this step by its own policy, before the run-level retry applies. `{ maxAttempts: 1 }`
   * for no retries.
   * @default the workflow's `stepRetries`, else the worker's `defaultStepRetries`: { maxAttempts: 3 } (1 s, then 2 s)
   */
  retries?: StepRetryPolicy;
  /**
   * Fails a try of the step with `StepHeartbeatTimeoutError` (aborting its signal) when its
   * function goes longer than this without calling `heartbeat()`, counted from the start of the
   * try; the step's `retries` then apply. For long work that reports as it goes.
   * @default no heartbeat check
   */
  heartbeatTimeout?: Duration;
  /**
   * Undoes the step (saga): when the run later fails for good, or is canceled with
   * `cancelRun(id, { compensate: true })`, the compensations of its completed steps run in reverse
   * order of completion, each called with its step's output. A compensation is a durable step of
   * its own: stored once it succeeds, never run again, retried by `compensateRetries`. A step that
   * failed is not compensated, nor one completed before a `step.commit`.
   */
  compensate?: (output: T, ctx: CompensationContext) => unknown;
  /** How a compensation is retried when it throws. @default { maxAttempts: 3 } (1 s, then 2 s) */
  compensateRetries?: StepRetryPolicy;
  /**
   * Runs the function in a thread of a `worker_threads` pool, for CPU-heavy work that would
   * otherwise stall the worker's event loop (heartbeats, claims, other runs). The function is
   * rebuilt in the thread from its source: it may use only its argument (`{ runId, workflow, step,
   * attempt, idempotencyKey }`) and what it imports itself, never variables around it; its result
   * crosses back by structured clone, an error with its name, message and fields. Stopping the
   * step (its `timeout`, a cancel) terminates the thread. Not with `heartbeatTimeout`.
   * @default false
   */
  sandbox?: boolean;
}

/** What a `step.run` function receives. */
export interface StepRunContext {
  /** Aborted when the run is canceled, times out, or the step's `timeout` or `heartbeatTimeout` passes. */
  signal: AbortSignal;
  /** Tells the step's `heartbeatTimeout` that the function is still making progress. Free to call often. */
  heartbeat(): void;
  /**
   * A key that names this step of this run, the same for each of its tries, retries and replays
   * after a crash: `<run id>:<step name>` (a repeated name has its `#2`, `#3`, ... suffix). Pass it
   * to payment and mail APIs as their idempotency key: a step's function can run twice (a worker
   * killed after the call and before the step was stored), its effect then happens once.
   */
  readonly idempotencyKey: string;
}

/**
 * What a `step.run({ sandbox: true })` function receives in its thread: plain data, and `require`
 * to load modules there (a dynamic `import()` compiled to CommonJS needs helpers the thread lacks).
 */
export interface SandboxStepContext {
  runId: string;
  workflow: string;
  /** The step's name. */
  step: string;
  /** The run's attempt. */
  attempt: number;
  /** The step's idempotency key, as `StepRunContext.idempotencyKey`. */
  idempotencyKey: string;
  /** Node's `require` in the thread: `const { createHash } = require('node:crypto')`. */
  require(id: string): any;
}

/** What a compensation function gets besides its step's output. */
export interface CompensationContext {
  runId: string;
  workflow: string;
  /** The step being undone. */
  step: string;
  /** Why the run is compensating: its error, or the `CanceledError` of a cancel with `{ compensate: true }`. */
  reason: unknown;
  /** The try of this compensation, from 1. */
  attempt: number;
  /** Aborts when the worker stops or loses the run. */
  signal: AbortSignal;
}

/** How the compensations of a run that failed went: what `onFailure` sees. */
export interface CompensationOutcome {
  /** `compensated`: every due compensation ran; `failed`: one failed after its retries (status `compensation_failed`). */
  status: 'compensated' | 'failed';
  /** The compensations that ran in this phase, by step name, in the order they ran. */
  steps: string[];
  /** The compensation's error, when one failed. */
  error?: unknown;
}

/**
 * How a step is retried when its function throws. Tries of one run attempt are counted: when they
 * are used up, the step's error fails the attempt, and the run's own `retries` decide what comes
 * next (a later run attempt gives the step its budget again). `NonRetriableError` (and the other
 * permanent errors) skip the step's retries. A delay of 1 s or more frees the worker slot: the run
 * goes back to `scheduled` until the try is due, like `waitFor`; shorter delays wait in process.
 */
export interface StepRetryPolicy {
  /** Tries of the step per run attempt, the first included. @default 3 */
  maxAttempts?: number;
  /** `fixed`: `delay` each time; `linear`: `delay` × n; `exponential`: `delay` × 2^(n-1). @default 'exponential' */
  backoff?: 'fixed' | 'linear' | 'exponential';
  /** The wait after the first failed try. @default '1s' */
  delay?: Duration;
  /** The longest wait. @default '5m' */
  maxDelay?: Duration;
  /** Shortens each wait by a random part of up to this fraction of it (0 to 1). @default 0 */
  jitter?: number;
}

/** Options of `step.runWorkflow` and `step.emitWorkflow`. */
export interface ChildRunOptions extends StepOptions {
  /** Start the child no earlier than this. */
  runAt?: Date | number;
  /** Reuse the run started with this key (see RunOptions.idempotencyKey). */
  idempotencyKey?: string;
  /** How long the idempotency key is kept. @default '7d' */
  idempotencyWindow?: Duration;
  /** @deprecated Use `idempotencyWindow` (a duration such as `'1d'`); `idempotencyTtl`, in seconds, goes in the next minor version. */
  idempotencyTtl?: number;
  /** The child's priority (see RunOptions.priority). @default the child workflow's `priority`, else 0 */
  priority?: number;
}

/** Options of `step.emitEvent`. */
export interface EmitEventStepOptions {
  name: string;
  /** Fan out at this time instead of now; the step then returns `[]`. */
  emitAt?: Date | number;
}

/**
 * A branch of `step.waitForAny`, made by `step.signal`, `step.timer`, `step.child` or `step.event`: a description
 * with no effect until `waitForAny` uses it. `T` is the value the branch wins with.
 */
export interface RaceBranch<T = unknown> {
  readonly kind: 'signal' | 'timer' | 'child' | 'event';
  /** Only carries `T` for the types: never set. */
  readonly __value?: T;
}

/** The result of `step.waitForAny`: `{ key, value }` of the winning branch, one member per branch. */
export type RaceResult<B extends Record<string, RaceBranch>> = {
  [K in keyof B & string]: { key: K; value: B[K] extends RaceBranch<infer V> ? V : never };
}[keyof B & string];

/** Options of `step.event`. */
export interface RaceEventOptions {
  /** Payload fields and the values they must equal (strings, finite numbers or booleans). @default any payload */
  match?: Record<string, string | number | boolean>;
}

/** Options of `step.child`. */
export interface RaceChildOptions {
  /** What happens to the child when another branch wins: canceled, or left running on its own. @default 'cancel' */
  onLose?: 'cancel' | 'abandon';
}

/** Options of `step.waitForEvent`. */
export interface WaitForEventOptions {
  /** Payload fields and the values they must equal (strings, finite numbers or booleans). @default any payload */
  match?: Record<string, string | number | boolean>;
  /** Give up after this long (from the first time the step is reached) and return `null`. @default no limit */
  timeout?: Duration;
}

/** Options of `step.waitForSignal`. */
export interface WaitForSignalOptions {
  /** Give up after this long (from the first time the step is reached) and return `null`. @default no limit */
  timeout?: Duration;
}
