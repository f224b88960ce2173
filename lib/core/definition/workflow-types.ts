/**
 * The shapes of a workflow definition: its options, triggers, handler context and step API, and its
 * entry in the registry. Types only; `workflow.ts` builds and checks definitions. `StepApi` is here,
 * with the options of its steps in `step-types.ts`, because it takes workflow definitions whose
 * handlers take it: keeping the two in one file keeps the types free of import cycles.
 */
import type { Duration } from './duration-format';
import type { BatchOptions, ConcurrencyOptions, DebounceOptions, KeyFrom, LimitOptions } from './flow-options';
import type { RunOptions } from './run-options';
import type { RunHandle } from './run-types';
import type { ScheduleBounds, SchedulePolicies } from './schedule-types';
import type {
  ChildRunOptions,
  CompensationOutcome,
  EmitEventStepOptions,
  RaceBranch,
  RaceChildOptions,
  RaceEventOptions,
  RaceResult,
  RunStepOptions,
  SandboxStepContext,
  StepOptions,
  StepRetryPolicy,
  StepRunContext,
  WaitForEventOptions,
  WaitForSignalOptions,
} from './step-types';
import type { InferInput, InputSchema } from './validation';

export type { BatchOptions, ConcurrencyOptions, DebounceOptions, KeyFrom, LimitOptions } from './flow-options';

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

/**
 * A workflow given by definition, by name, or by a typed handle that names it (in Nest, the
 * `WorkflowRef` injected with `@InjectWorkflow(Class, 'method')`): the handle types the input and
 * the output of `step.runWorkflow` by class and method.
 */
export type WorkflowTarget<TInput = unknown, TOutput = unknown> = WorkflowDefinition<TInput, TOutput> | NamedWorkflow<TInput, TOutput> | string;

/** A typed handle of a workflow registered under `name` (as Nest's `WorkflowRef`). */
export interface NamedWorkflow<TInput = unknown, TOutput = unknown> {
  readonly name: string;
  run(input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>>;
}

/** The durable step API given to handlers. */
export interface StepApi {
  /**
   * Runs `fn` once per run: its output is stored in Redis and returned from storage on every later
   * attempt or after a crash, without calling `fn` again.
   */
  run<T>(options: RunStepOptions<NoInfer<T>> & { sandbox: true }, fn: (ctx: SandboxStepContext) => T | Promise<T>): Promise<T>;
  run<T>(options: RunStepOptions<NoInfer<T>> | string, fn: (ctx: StepRunContext) => T | Promise<T>): Promise<T>;
  /**
   * A point of no return (saga): steps completed before it are never compensated afterwards,
   * whatever happens to the run. Durable like a step: `name` is its step name.
   */
  commit(name: string): Promise<void>;
  /**
   * Sleeps durably: the run goes back to `scheduled` (no worker slot, no attempt used) and resumes at
   * the wake time, even if every worker restarted meanwhile. `target`: ms from the first time this
   * step is reached, a duration string (`'75s'`, `'5m'`, `'1d'`), or a Date.
   */
  sleep(options: StepOptions | string, target: Duration | Date): Promise<void>;
  /**
   * The former name of `step.sleep`: the same step, so a run that slept with one resumes with the other.
   * @deprecated Use `step.sleep`; `waitFor` goes in the next minor version.
   */
  waitFor(options: StepOptions | string, target: Duration | Date): Promise<void>;
  /**
   * Starts a child run and waits for its output without holding a worker slot. A replayed or
   * recovered parent never starts a second child. `timeout` caps the wait (TimeoutError).
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
  waitForSignal<T = unknown>(options: StepOptions | string, signal: string | SignalDefinition<T>, waitOptions?: WaitForSignalOptions): Promise<T | null>;
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

/** The argument of a workflow handler. */
export interface WorkflowContext<TInput = unknown> {
  input: TInput;
  run: RunInfo;
  /** The time of the schedule's tick that started this run (a `cron` trigger or a runtime schedule); absent otherwise. */
  scheduledAt?: Date;
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

/** A cron trigger: a cron expression (croner syntax; a leading seconds field is allowed), or an RFC 5545 `rrule`. */
export interface CronTrigger extends SchedulePolicies, ScheduleBounds {
  /** Stable id of the schedule. @default "<workflow>#<index>" */
  id?: string;
  /** The cron expression; give it or `rrule`. */
  expression?: string;
  /** IANA time zone of the expression. @default the worker's */
  timezone?: string;
  /**
   * An RFC 5545 rule, for what cron cannot say ("the first Monday of each month", "every other
   * Friday"), instead of `expression`: its DTSTART line (with its TZID) first, as
   * `"DTSTART;TZID=Europe/Paris:20270101T093000\nRRULE:FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1"`. Needs
   * the optional peer `rrule`; its COUNT or UNTIL ends the schedule.
   */
  rrule?: string;
  /**
   * The input of every run it starts, or a function of the tick's time that returns it, called when
   * the tick fires (by a worker with this workflow's definition: a worker without it leaves the
   * tick to one that has it). @default null
   */
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
  /**
   * The version of this workflow's code, a positive integer. A run keeps the version it started
   * on and only a worker that registered that version claims it; new runs start on the latest
   * registered version. See docs/changing-workflows.md.
   * @default 1
   */
  version?: number;
  /**
   * What happens when a replay reaches steps in an order its journal contradicts
   * (`NonDeterminismError`): `'fail'` ends the run `failed`; `'retry-latest'` retries it once on
   * the latest registered version of the workflow (the run moves to that version), and fails it
   * if it already runs on the latest version.
   * @default 'fail'
   */
  onNonDeterminism?: 'fail' | 'retry-latest';
  /** Total attempts, the first included. Same as `retries.maxAttempts`. @default 1 */
  maxAttempts?: number;
  retries?: RetryPolicy;
  /**
   * How the steps of this workflow retry when their function throws, unless a step sets its own
   * `retries`. `{ maxAttempts: 1 }` turns step retries off.
   * @default the worker's `defaultStepRetries`: { maxAttempts: 3 } (exponential, 1 s then 2 s)
   */
  stepRetries?: StepRetryPolicy;
  /** Validates input on enqueue and before the handler runs: a Standard Schema or a class-validator DTO. */
  schema?: TSchema;
  /**
   * Called once when the run has failed for good (after its last attempt), after the compensations
   * of its steps ran (`compensation`: set when there were any).
   */
  onFailure?: (ctx: { error: unknown; run: RunInfo; input: unknown; compensation?: CompensationOutcome }) => unknown;
  /**
   * Most runs of this workflow running at once, across all workers; more wait as `queued`
   * without using an attempt. `Infinity` for no limit: the workers' concurrency bounds it.
   * @default Infinity, or the worker's `defaultMaxConcurrency`
   */
  maxConcurrency?: number;
  /** Collapse starts with the same key into one run (trailing edge, latest input wins). */
  debounce?: DebounceOptions<TInput>;
  /** Over the limit, a run is rescheduled for when the window allows, attempt unchanged. */
  throttle?: LimitOptions<TInput>;
  /** Over the limit, a run fails before its handler with RateLimitExceededError. */
  rateLimit?: LimitOptions<TInput>;
  /**
   * Runs with the same mutex key (across workflows and queues) never run at the same time. Within
   * one workflow, `concurrency: { key, limit: 1 }` does the same and keeps keys fair.
   */
  mutex?: KeyFrom<TInput>;
  /**
   * At most `limit` runs per key running at once, fleet-wide (a tenant, a customer, an account).
   * Keys take turns: each key with runs waiting holds one place in the queue, so a key's backlog
   * never delays another key's next run by more than one run of each other waiting key.
   * `limit: 1` is a mutex per key. Not combined with `priority`.
   */
  concurrency?: ConcurrencyOptions<TInput>;
  /**
   * The default priority of this workflow's runs (a start's `priority` replaces it): an integer
   * from -1000 to 1000, higher first. @default 0
   */
  priority?: number;
  /** Start a run on these events. */
  event?: EventTrigger[];
  /**
   * Take the events that start this workflow in batches (`event` triggers, or `@OnEvent`): one run
   * per batch, whose input is the array of the events' payloads, oldest first. A batch starts when
   * it holds `maxSize` events, or `timeout` after its first event. With `key` (a top-level field of
   * the payloads), each value of the field has its own batches. Runs started otherwise (`start`,
   * `runByName`, a cron tick) are not batched: give them an array.
   */
  batch?: BatchOptions;
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
  /** The version of the workflow's code (option `version`). @default 1 */
  readonly version: number;
  readonly maxAttempts: number;
  /** `undefined`: the worker's default applies. `Infinity`: no limit. */
  readonly maxConcurrency: number | undefined;
  readonly options: WorkflowOptions<InputSchema | undefined, any>;
  readonly handler: WorkflowHandler<TInput, TOutput>;
  /** Starts a run with `options.client`, or the client given to `setDefaultClient`. */
  run(input: TInput, options?: RunOptions & { client?: RunStarter }): Promise<RunHandle<TOutput>>;
}

/** Registry entry of a workflow, as synced by workers. */
export interface WorkflowMeta {
  name: string;
  queue: string;
  maxAttempts: number;
  /** `Infinity` when unlimited. */
  maxConcurrency: number;
  /** Events it is subscribed to. */
  events: string[];
  /** Ids of its cron schedules. */
  crons: string[];
  owner: string;
  updatedAt: number;
  /** The latest registered version: what runs started by name (events, crons, `runByName`) get. */
  version: number;
  /** Every version workers registered, oldest first, with the workers that serve it now. */
  versions: WorkflowVersionState[];
}

/** A registered version of a workflow (`WorkflowMeta.versions`). */
export interface WorkflowVersionState {
  version: number;
  /** Ids of the live workers that registered this version. */
  workers: string[];
  /** When a worker last said it serves this version (ms). */
  updatedAt: number;
  /**
   * Set when no live worker has this version while runs started on it are not over, e.g.
   * `no worker for checkout v1`: those runs stay queued until a worker with that version starts.
   */
  noWorker?: string;
}

/**
 * A signal defined once, used on both sides: `step.waitForSignal(step, approve)` returns its
 * payload's type, and `client.signal(runId, approve, payload)` checks that type at compile time and
 * validates the payload with the schema before sending it.
 */
export interface SignalDefinition<T = unknown> {
  readonly name: string;
  /** Validates the payload before it is sent (a Standard Schema or a class-validator DTO class). */
  readonly schema?: InputSchema;
  /** Carries the payload type; never set. */
  readonly __payload?: T;
}
