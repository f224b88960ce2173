import type { Duration } from './duration';
import { ConfigurationError } from './errors';
import type { InferInput, InputSchema } from './validation';
import type { RedflowClient, RunHandle, RunOptions } from './client';

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

/** The durable step API given to handlers. */
export interface StepApi {
  /**
   * Runs `fn` once per run: its output is stored in Redis and returned from storage on every later
   * attempt or after a crash, without calling `fn` again.
   */
  run<T>(options: StepOptions | string, fn: (ctx: { signal: AbortSignal }) => T | Promise<T>): Promise<T>;
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

/** Options of `defineWorkflow`. */
export interface WorkflowOptions<TSchema extends InputSchema | undefined = undefined> {
  /** @default "default" */
  queue?: string;
  /** Total attempts, the first included. Same as `retries.maxAttempts`. @default 1 */
  maxAttempts?: number;
  retries?: RetryPolicy;
  /** Validates input on enqueue and before the handler runs: a Standard Schema or a class-validator DTO. */
  schema?: TSchema;
  /** Called once when the run has failed for good (after its last attempt). */
  onFailure?: (ctx: { error: unknown; run: RunInfo; input: unknown }) => unknown;
}

export type WorkflowHandler<TInput, TOutput> = (ctx: WorkflowContext<TInput>) => Promise<TOutput> | TOutput;

/** A defined workflow. */
export interface WorkflowDefinition<TInput = unknown, TOutput = unknown> {
  readonly name: string;
  readonly queue: string;
  readonly maxAttempts: number;
  readonly options: WorkflowOptions<InputSchema | undefined>;
  readonly handler: WorkflowHandler<TInput, TOutput>;
  /** Starts a run with `options.client`, or the client given to `setDefaultClient`. */
  run(input: TInput, options?: RunOptions & { client?: RedflowClient }): Promise<RunHandle<TOutput>>;
}

let defaultClient: RedflowClient | undefined;

/** Sets the client `workflow.run()` uses when no `client` option is given. */
export function setDefaultClient(client: RedflowClient | undefined): void {
  defaultClient = client;
}

/** A set of workflow definitions, by name: what a worker executes and what a client validates against. */
export class WorkflowRegistry {
  private readonly byName = new Map<string, WorkflowDefinition<any, any>>();

  /** Defines a workflow in this registry. Throws `ConfigurationError` if the name is taken. */
  define<TSchema extends InputSchema | undefined = undefined, TOutput = unknown, TInput = InferInput<TSchema>>(
    name: string,
    options: WorkflowOptions<TSchema>,
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

function createDefinition<TInput, TOutput>(
  name: string,
  options: WorkflowOptions<InputSchema | undefined>,
  handler: WorkflowHandler<TInput, TOutput>,
): WorkflowDefinition<TInput, TOutput> {
  if (!NAME.test(name)) {
    throw new ConfigurationError(
      `Workflow name ${JSON.stringify(name)} is invalid. Use 1-200 letters, digits, ".", ":", "-", "_" or "/", starting with a letter or digit.`,
    );
  }
  const queue = options.queue ?? 'default';
  if (!NAME.test(queue)) throw new ConfigurationError(`Queue name ${JSON.stringify(queue)} of workflow "${name}" is invalid. Use the same characters as workflow names.`);
  const maxAttempts = options.retries?.maxAttempts ?? options.maxAttempts ?? 1;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1) {
    throw new ConfigurationError(`maxAttempts of workflow "${name}" must be an integer >= 1, got ${maxAttempts}.`);
  }
  const definition: WorkflowDefinition<TInput, TOutput> = {
    name,
    queue,
    maxAttempts,
    options,
    handler,
    run(input, runOptions) {
      const client = runOptions?.client ?? defaultClient;
      if (!client) {
        throw new ConfigurationError(
          `Workflow "${name}" has no client to run with. Pass { client } to run() or call setDefaultClient(createClient(...)) first.`,
        );
      }
      return client.start(definition, input, runOptions);
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
  options: WorkflowOptions<TSchema>,
  handler: WorkflowHandler<TInput, TOutput>,
): WorkflowDefinition<TInput, TOutput> {
  return defaultRegistry.define(name, options, handler);
}
