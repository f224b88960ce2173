import { Cron } from 'croner';
import { type Duration } from './duration';
import { ConfigurationError, InvalidCronError } from '../errors';
import { hasDynamicFlowKeys } from './flow-control';
import { assertWorkflowOptionKeys, checkDuration, checkInteger, checkResourceName, checkUserName } from './option-checks';
import type { InferInput, InputSchema } from './validation';
import type { WorkflowClient, RunHandle, RunOptions } from '../client/workflow-client';

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
export type WorkflowRef<TInput = unknown, TOutput = unknown> = WorkflowDefinition<TInput, TOutput> | string;

/** The durable step API given to handlers. */
export interface StepApi {
  /**
   * Runs `fn` once per run: its output is stored in Redis and returned from storage on every later
   * attempt or after a crash, without calling `fn` again.
   */
  run<T>(options: StepOptions | string, fn: (ctx: { signal: AbortSignal }) => T | Promise<T>): Promise<T>;
  /**
   * Waits durably: the run goes back to `scheduled` (no worker slot, no attempt used) and resumes at
   * the wake time. `target`: ms from the first time this step is reached, a duration string, or a Date.
   */
  waitFor(options: StepOptions | string, target: Duration | Date): Promise<void>;
  /**
   * Starts a child run and waits for its output without holding a worker slot. A replayed or
   * recovered parent never starts a second child. `timeoutMs` caps the wait (TimeoutError).
   */
  runWorkflow<TInput, TOutput>(options: ChildRunOptions | string, workflow: WorkflowRef<TInput, TOutput>, input: TInput): Promise<TOutput>;
  /** Starts a child run and returns its id without waiting for it. */
  emitWorkflow<TInput>(options: ChildRunOptions | string, workflow: WorkflowRef<TInput>, input: TInput): Promise<string>;
  /** Emits an event to every subscribed workflow; returns their run ids (`[]` when emitAt is in the future). */
  emitEvent(options: EmitEventStepOptions | string, event: string, payload: unknown): Promise<string[]>;
}

/** The argument of a workflow handler. */
export interface WorkflowContext<TInput> {
  input: TInput;
  run: RunInfo;
  /** Aborted when the run is canceled or this worker loses the run. */
  signal: AbortSignal;
  step: StepApi;
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
  /** Called once when the run has failed for good (after its last attempt). */
  onFailure?: (ctx: { error: unknown; run: RunInfo; input: unknown }) => unknown;
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
  run(input: TInput, options?: RunOptions & { client?: WorkflowClient }): Promise<RunHandle<TOutput>>;
}

let defaultClient: WorkflowClient | undefined;

/** Sets the client `workflow.run()` uses when no `client` option is given. */
export function setDefaultClient(client: WorkflowClient | undefined): void {
  defaultClient = client;
}

/** A set of workflow definitions, by name: what a worker executes and what a client validates against. */
export class WorkflowRegistry {
  private readonly byName = new Map<string, WorkflowDefinition<any, any>>();

  /** Defines a workflow in this registry. Throws `ConfigurationError` if the name is taken. */
  define<TSchema extends InputSchema | undefined = undefined, TOutput = unknown, TInput = InferInput<TSchema>>(
    name: string,
    options: WorkflowOptions<TSchema, TInput>,
    handler: WorkflowHandler<TInput, TOutput>,
  ): WorkflowDefinition<TInput, TOutput> {
    return this.add(createDefinition(name, options, handler));
  }

  /** Adds a definition. Throws `ConfigurationError` if another one has the same name. */
  add<TInput, TOutput>(definition: WorkflowDefinition<TInput, TOutput>): WorkflowDefinition<TInput, TOutput> {
    const existing = this.byName.get(definition.name);
    if (existing && existing !== definition) {
      throw new ConfigurationError(`Workflow "${definition.name}" is defined twice in one registry. Rename one of them.`);
    }
    this.byName.set(definition.name, definition);
    return definition;
  }

  get(name: string): WorkflowDefinition<unknown, unknown> | undefined {
    return this.byName.get(name);
  }

  list(): WorkflowDefinition<unknown, unknown>[] {
    return [...this.byName.values()];
  }

  /** The distinct queues of the registered workflows. */
  queues(): string[] {
    return [...new Set(this.list().map((d) => d.queue))];
  }
}

const defaultRegistry = new WorkflowRegistry();

/** The registry `defineWorkflow` adds to, used by workers and clients that are given none. */
export function getDefaultRegistry(): WorkflowRegistry {
  return defaultRegistry;
}

const NAME = /^[A-Za-z0-9][\w.:\-/]{0,199}$/;

/**
 * An event name, checked where events are emitted: the same rule as the event names workflows
 * subscribe to, so an emit can never use a name no workflow could subscribe to.
 */
export function checkEventName(event: unknown, what: string): string {
  if (typeof event !== 'string' || !NAME.test(event)) {
    throw new ConfigurationError(
      `${what} ${JSON.stringify(event)} is invalid. Use 1-200 letters, digits, ".", ":", "-", "_" or "/", starting with a letter or digit, as in the event triggers of workflows.`,
    );
  }
  return event;
}

function createDefinition<TInput, TOutput>(
  name: string,
  options: WorkflowOptions<InputSchema | undefined, any>,
  handler: WorkflowHandler<TInput, TOutput>,
): WorkflowDefinition<TInput, TOutput> {
  if (!NAME.test(name)) {
    throw new ConfigurationError(
      `Workflow name ${JSON.stringify(name)} is invalid. Use 1-200 letters, digits, ".", ":", "-", "_" or "/", starting with a letter or digit.`,
    );
  }
  assertWorkflowOptionKeys(`the options of workflow "${name}"`, options);
  if (typeof handler !== 'function') throw new ConfigurationError(`Workflow "${name}" needs a handler function, got ${typeof handler}.`);
  const queue = checkResourceName(options.queue ?? 'default', `queue of workflow "${name}"`);
  const maxAttempts = checkInteger(options.retries?.maxAttempts ?? options.maxAttempts ?? 1, `maxAttempts of workflow "${name}"`, 1, 1_000_000);
  const maxConcurrency = options.maxConcurrency;
  if (maxConcurrency !== undefined && maxConcurrency !== Infinity && (!Number.isInteger(maxConcurrency) || maxConcurrency < 1)) {
    throw new ConfigurationError(`maxConcurrency of workflow "${name}" must be an integer >= 1 or Infinity, got ${maxConcurrency}.`);
  }
  validateFlowControl(name, options);
  const definition: WorkflowDefinition<TInput, TOutput> = {
    name,
    queue,
    maxAttempts,
    maxConcurrency,
    options,
    handler,
    run(input, runOptions) {
      const { client: given, ...startOptions } = runOptions ?? {};
      const client = given ?? defaultClient;
      if (!client) {
        throw new ConfigurationError(
          `Workflow "${name}" has no client to run with. Pass { client } to run() or call setDefaultClient(createClient(...)) first.`,
        );
      }
      return client.start(definition, input, startOptions);
    },
  };
  return definition;
}

/**
 * Defines a workflow in the default registry. The handler runs from the top on every attempt;
 * work wrapped in `step.run` runs once and is replayed from Redis afterwards.
 */
export function defineWorkflow<TSchema extends InputSchema | undefined = undefined, TOutput = unknown, TInput = InferInput<TSchema>>(
  name: string,
  options: WorkflowOptions<TSchema, TInput>,
  handler: WorkflowHandler<TInput, TOutput>,
): WorkflowDefinition<TInput, TOutput> {
  return defaultRegistry.define(name, options, handler);
}

/** The id of each cron trigger of a workflow. */
export function cronIds(definition: WorkflowDefinition<unknown, unknown>): string[] {
  return (definition.options.cron ?? []).map((c, i) => c.id ?? `${definition.name}#${i}`);
}

/** A croner schedule, or `InvalidCronError` naming the workflow and the expression. */
export function parseCron(workflow: string, trigger: Pick<CronTrigger, 'expression' | 'timezone'>): Cron {
  try {
    const cron = new Cron(trigger.expression, { timezone: trigger.timezone, paused: true });
    cron.nextRun(); // croner checks the time zone only when it computes a date
    return cron;
  } catch (error) {
    throw new InvalidCronError(workflow, trigger.expression, trigger.timezone, (error as Error).message);
  }
}

/** A fixed flow-control key is checked here; one computed by a function is checked per run. */
function checkKeyOption(key: unknown, what: string): void {
  if (typeof key !== 'function') checkUserName(key, what);
}

function validateFlowControl(name: string, options: WorkflowOptions<InputSchema | undefined, any>): void {
  const of = `of workflow "${name}"`;
  const retryDelay = options.retries?.delay;
  if (retryDelay !== undefined && typeof retryDelay !== 'function') checkDuration(retryDelay, `retries.delay ${of}`, { allowZero: true });
  if (options.mutex !== undefined) checkKeyOption(options.mutex, `mutex ${of}`);
  if (options.debounce) {
    checkDuration(options.debounce.period, `debounce.period ${of}`);
    if (options.debounce.timeout !== undefined) checkDuration(options.debounce.timeout, `debounce.timeout ${of}`);
    if (options.debounce.key === undefined) throw new ConfigurationError(`debounce ${of} needs a key: a string or (input) => string.`);
    checkKeyOption(options.debounce.key, `debounce.key ${of}`);
  }
  for (const kind of ['throttle', 'rateLimit'] as const) {
    const limit = options[kind];
    if (!limit) continue;
    checkInteger(limit.limit, `${kind}.limit ${of}`, 1, 1_000_000);
    checkDuration(limit.period, `${kind}.period ${of}`);
    if (limit.key !== undefined) checkKeyOption(limit.key, `${kind}.key ${of}`);
  }
  for (const event of options.event ?? []) {
    if (!event || typeof event.name !== 'string' || !NAME.test(event.name)) {
      throw new ConfigurationError(`Event name ${JSON.stringify(event?.name)} of workflow "${name}" is invalid. Use the same characters as workflow names.`);
    }
  }
  const triggered = (options.event?.length ?? 0) > 0 || (options.cron?.length ?? 0) > 0;
  if (triggered && hasDynamicFlowKeys(options)) {
    throw new ConfigurationError(
      `Workflow "${name}" has ${options.event?.length ? 'event' : 'cron'} triggers and computes a mutex, debounce, throttle or rate-limit key with a function. Runs started by an event or a cron tick are created inside Redis, where that function cannot run: give those options fixed keys, or start the workflow from a handler of the event that passes the key in its input.`,
    );
  }
  const ids = new Set<string>();
  (options.cron ?? []).forEach((trigger, i) => {
    parseCron(name, trigger);
    const id = trigger.id === undefined ? `${name}#${i}` : checkUserName(trigger.id, `cron[${i}].id ${of}`);
    if (ids.has(id)) throw new ConfigurationError(`Cron id "${id}" is used twice in workflow "${name}". Give each cron trigger its own id.`);
    ids.add(id);
  });
}
