/**
 * The shapes of a workflow definition: its options, triggers, step API and handler context. Types
 * only; `workflow.ts` builds and checks definitions.
 */
import type { Duration } from './duration-format';
import type { RunHandle, RunOptions } from './types';
import type { InferInput, InputSchema } from './validation';

/** What starts runs of a definition: a `WorkflowClient`, given to `run()` or `setDefaultClient`. */
export interface RunStarter {
  start<TInput, TOutput>(workflow: WorkflowDefinition<TInput, TOutput>, input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>>;
}

/** What a handler knows about its run. */
export interface RunInfo {
  id: string;
  workflow: string;
  queue: string;
  /** 1 on the first attempt. */
  attempt: number;
  maxAttempts: number;
}

/** Options of a durable step. */
export interface StepOptions {
  /** Unique within the run; a repeated name gets a `#2`, `#3`, ... suffix in call order. */
  name: string;
  /** Aborts the step's signal and fails the attempt with `TimeoutError` after this many ms. */
  timeoutMs?: number;
}

/** Options of `step.run` (and `@Step`). `T` is the step's output. */
export interface RunStepOptions<T = any> extends StepOptions {
  /** Retries this step by its own policy, before the run-level retry applies. @default no step retries */
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
}

/** What a `step.run` function receives. */
export interface StepRunContext {
  /** Aborted when the run is canceled, times out, or the step's `timeoutMs` or `heartbeatTimeout` passes. */
  signal: AbortSignal;
  /** Tells the step's `heartbeatTimeout` that the function is still making progress. Free to call often. */
  heartbeat(): void;
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
  /** Seconds the idempotency key is kept. @default 604800 (7 days) */
  idempotencyTtl?: number;
}

/** Options of `step.emitEvent`. */
export interface EmitEventStepOptions {
  name: string;
  /** Fan out at this time instead of now; the step then returns `[]`. */
  emitAt?: Date | number;
}

/** A workflow given by definition or by name. */
export type WorkflowTarget<TInput = unknown, TOutput = unknown> = WorkflowDefinition<TInput, TOutput> | string;

/** The durable step API given to handlers. */
export interface StepApi {
  /**
   * Runs `fn` once per run: its output is stored in Redis and returned from storage on every later
   * attempt or after a crash, without calling `fn` again.
   */
  run<T>(options: RunStepOptions<NoInfer<T>> | string, fn: (ctx: StepRunContext) => T | Promise<T>): Promise<T>;
  /**
   * A point of no return (saga): steps completed before it are never compensated afterwards,
   * whatever happens to the run. Durable like a step: `name` is its step name.
   */
  commit(name: string): Promise<void>;
  /**
   * Waits durably: the run goes back to `scheduled` (no worker slot, no attempt used) and resumes at
   * the wake time. `target`: ms from the first time this step is reached, a duration string, or a Date.
   */
  waitFor(options: StepOptions | string, target: Duration | Date): Promise<void>;
  /**
   * Starts a child run and waits for its output without holding a worker slot. A replayed or
   * recovered parent never starts a second child. `timeoutMs` caps the wait (TimeoutError).
   */
  runWorkflow<TInput, TOutput>(options: ChildRunOptions | string, workflow: WorkflowTarget<TInput, TOutput>, input: TInput): Promise<TOutput>;
  /** Starts a child run and returns its id without waiting for it. */
  emitWorkflow<TInput>(options: ChildRunOptions | string, workflow: WorkflowTarget<TInput>, input: TInput): Promise<string>;
  /** Emits an event to every subscribed workflow; returns their run ids (`[]` when emitAt is in the future). */
  emitEvent(options: EmitEventStepOptions | string, event: string, payload: unknown): Promise<string[]>;
  /**
   * Waits for a signal sent with `client.signal(runId, signal, payload)` and returns its payload, or
   * `null` after `timeout`. The run waits without a worker slot, like `waitFor`. Signals sent before
   * the wait are buffered (up to 1,000 per run) and consumed oldest first, each by one wait; a
   * replay returns the payload this step received, never a second signal.
   */
  waitForSignal<T = unknown>(options: StepOptions | string, signal: string, waitOptions?: WaitForSignalOptions): Promise<T | null>;
  /**
   * Stores `value` (any JSON, at most 64 KiB) as the run's progress: `getRun(id).progress`, the
   * dashboard and the CLI show the latest one. Not a step: it costs one write (shared with any step
   * records waiting to be stored), and a replay sets it again as it goes.
   */
  setProgress(value: unknown): Promise<void>;
  /**
   * The workflow's clock, journaled: the first call at this place in the run reads the clock
   * (virtual in tests), and every replay (after a wait, a retry or a crash) returns the same ms.
   * Values are stored with the next step's checkpoint, before that step's function runs.
   */
  now(): number;
  /** `Math.random()`, journaled like `now()`: a replay returns the same number. */
  random(): number;
  /** A random UUID (v4), journaled like `now()`: a replay returns the same id, e.g. for an idempotency key. */
  uuid(): string;
  /**
   * For changing code that runs may be replaying: `true` when the run reaches this point running
   * this code (take the new path), `false` when its journal shows it went past this point before
   * the patch was deployed (its stored steps continue beyond here: take the old path). The answer
   * is stored and kept for the rest of the run. `id` names the change; use it once per change.
   */
  patched(id: string): boolean;
  /**
   * Waits for `client.emitEvent(event, payload)` (or `step.emitEvent`) with a payload whose
   * top-level fields equal `match`, and returns the payload, or `null` after `timeout`. The run
   * waits without a worker slot. Only events emitted after the wait started count: an earlier one
   * is not kept for it. Every wait that matches an event gets it.
   */
  waitForEvent<T = unknown>(options: StepOptions | string, event: string, waitOptions?: WaitForEventOptions): Promise<T | null>;
  /**
   * Waits for the first of several branches (`step.signal`, `step.timer`, `step.child`, `step.event`) and returns
   * `{ key, value }` for the branch that won, typed from the branches. The run waits without a
   * worker slot; the winner is stored with the step, so a replay (a later retry, a worker restart)
   * returns it without waiting again. Signals of losing branches that come later stay buffered for
   * a later wait; a losing child is canceled, or left running with `onLose: 'abandon'`. A child
   * that fails (or is canceled) before any other branch wins makes this step throw its error.
   */
  waitForAny<B extends Record<string, RaceBranch>>(options: StepOptions | string, branches: B): Promise<RaceResult<B>>;
  /** A `waitForAny` branch won by `client.signal(runId, name, payload)`; its value is the payload. No effect by itself. */
  signal<T = unknown>(name: string): RaceBranch<T>;
  /**
   * A `waitForAny` branch won once `target` has passed (ms or a duration from the first time the
   * step is reached, or a Date); its value is `null`. No effect by itself.
   */
  timer(target: Duration | Date): RaceBranch<null>;
  /**
   * A `waitForAny` branch won when a child run of `workflow` succeeds; its value is the child's
   * output. The child starts when waitForAny reaches it (id `<run id>.<step name>.<key>`), not before.
   */
  child<TInput, TOutput>(workflow: WorkflowTarget<TInput, TOutput>, input: TInput, options?: RaceChildOptions): RaceBranch<TOutput>;
  /**
   * A `waitForAny` branch won by `client.emitEvent(event, payload)` (or `step.emitEvent`) with a
   * payload whose top-level fields equal `match`; its value is the payload. Only events emitted
   * after the race started count, as with `waitForEvent`. No effect by itself.
   */
  event<T = unknown>(event: string, options?: RaceEventOptions): RaceBranch<T>;
}

/**
 * A branch of `step.waitForAny`, made by `step.signal`, `step.timer` or `step.child`: a description
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

/** `cancelOn` of a workflow: an event that cancels its runs. */
export interface CancelOnTrigger<TInput = any> {
  event: string;
  /**
   * Which events cancel which run: a payload field name (or several) whose value must equal the
   * same field of the run's input, or a function of the input giving the fields and values.
   * @default every event of that name cancels every run
   */
  match?: string | string[] | ((input: TInput) => Record<string, string | number | boolean>);
}

/** Options of `step.waitForSignal`. */
export interface WaitForSignalOptions {
  /** Give up after this long (from the first time the step is reached) and return `null`. @default no limit */
  timeout?: Duration;
}

/** The argument of a workflow handler. */
export interface WorkflowContext<TInput = unknown> {
  input: TInput;
  run: RunInfo;
  /** Aborted when the run is canceled or this worker loses the run. */
  signal: AbortSignal;
  step: StepApi;
  /**
   * Publishes `value` under `key` on the run, for `client.getRunEvent(runId, key)` to read (the
   * latest value wins). Stored with the run, so it outlives the attempt; a replay sets it again.
   */
  setEvent(key: string, value: unknown): Promise<void>;
}

/** How failed attempts are retried. */
export interface RetryPolicy {
  /** Total attempts, the first included. @default 1 */
  maxAttempts?: number;
  /**
   * Wait before the next attempt: ms, a duration string, or a function of the failed attempt.
   * @default exponential from 250 ms, doubling per attempt, capped at 30 s, plus up to 100 ms jitter
   */
  delay?: Duration | ((ctx: { run: RunInfo; error: unknown }) => Duration | Date);
  /** Return false to fail at once. @default every error but NonRetriableError is retried */
  shouldRetry?: (ctx: { run: RunInfo; error: unknown }) => boolean;
}

/** A key derived from the input: a fixed string or a function of the input. */
export type KeyFrom<TInput> = string | ((input: TInput) => string);

/** Debounce: collapse repeated starts with the same key into one run, started after a quiet period. */
export interface DebounceOptions<TInput = any> {
  /** Quiet period: each new start within it restarts it and replaces the input. */
  period: Duration;
  /** Start no later than this after the first start, even if starts keep coming. */
  timeout?: Duration;
  key: KeyFrom<TInput>;
}

/** At most `limit` runs per `period` for one key. */
export interface LimitOptions<TInput = any> {
  limit: number;
  period: Duration;
  /** @default one window for the whole workflow */
  key?: KeyFrom<TInput>;
}

/** A cron trigger (croner syntax; a leading seconds field is allowed). */
export interface CronTrigger {
  /** Stable id of the schedule. @default "<workflow>#<index>" */
  id?: string;
  expression: string;
  /** IANA time zone. @default the worker's */
  timezone?: string;
  /** The input of every run it starts. @default null */
  input?: unknown;
}

/** An event trigger: the workflow gets a run for every `emitEvent(name, payload)`. */
export interface EventTrigger {
  name: string;
}

/** Options of `defineWorkflow`. */
export interface WorkflowOptions<TSchema extends InputSchema | undefined = undefined, TInput = InferInput<TSchema>> {
  /** @default "default" */
  queue?: string;
  /** Total attempts, the first included. Same as `retries.maxAttempts`. @default 1 */
  maxAttempts?: number;
  retries?: RetryPolicy;
  /** Validates input on enqueue and before the handler runs: a Standard Schema or a class-validator DTO. */
  schema?: TSchema;
  /**
   * Called once when the run has failed for good (after its last attempt), after the compensations
   * of its steps ran (`compensation`: set when there were any).
   */
  onFailure?: (ctx: { error: unknown; run: RunInfo; input: unknown; compensation?: CompensationOutcome }) => unknown;
  /**
   * Most runs of this workflow running at once, across all workers; more wait as `queued`
   * without using an attempt. `Infinity` for no limit.
   * @default 1, or the worker's `defaultMaxConcurrency`
   */
  maxConcurrency?: number;
  /** Collapse starts with the same key into one run (trailing edge, latest input wins). */
  debounce?: DebounceOptions<TInput>;
  /** Over the limit, a run is rescheduled for when the window allows, attempt unchanged. */
  throttle?: LimitOptions<TInput>;
  /** Over the limit, a run fails before its handler with RateLimitExceededError. */
  rateLimit?: LimitOptions<TInput>;
  /** Runs with the same mutex key (across workflows and queues) never run at the same time. */
  mutex?: KeyFrom<TInput>;
  /** Start a run on these events. */
  event?: EventTrigger[];
  /** Start a run on these schedules: exactly one run per tick across all workers. */
  cron?: CronTrigger[];
  /**
   * Cancel a run when one of these events arrives with matching fields, while it runs or waits
   * (from the start of its first attempt on), like `cancelRun`.
   */
  cancelOn?: CancelOnTrigger<TInput>[];
  /**
   * The longest a run may take, counted from its first start and including its waits (timers,
   * signals, events, children) and retry delays. When it passes, the run fails for good with
   * `RunTimeoutError` (a `TimeoutError`), not retried: a running attempt is aborted, a waiting run
   * is woken to fail. A run's own `timeout` (start options) replaces it.
   * @default no limit
   */
  timeout?: Duration;
}

export type WorkflowHandler<TInput, TOutput> = (ctx: WorkflowContext<TInput>) => Promise<TOutput> | TOutput;

/** A defined workflow. */
export interface WorkflowDefinition<TInput = unknown, TOutput = unknown> {
  readonly name: string;
  readonly queue: string;
  readonly maxAttempts: number;
  /** `undefined`: the worker's default applies. `Infinity`: no limit. */
  readonly maxConcurrency: number | undefined;
  readonly options: WorkflowOptions<InputSchema | undefined, any>;
  readonly handler: WorkflowHandler<TInput, TOutput>;
  /** Starts a run with `options.client`, or the client given to `setDefaultClient`. */
  run(input: TInput, options?: RunOptions & { client?: RunStarter }): Promise<RunHandle<TOutput>>;
}
