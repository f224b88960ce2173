import { ConfigurationError, UnknownWorkflowError } from '../errors';
import { checkCronId, checkCronTrigger, checkSchedulePolicies } from './cron';
import { hasDynamicFlowKeys } from './flow-control';
import {
  assertWorkflowOptionKeys,
  checkDuration,
  checkInteger,
  checkPriority,
  checkResourceName,
  checkRunTimeout,
  checkStepRetry,
  checkUserName,
  checkWorkflowVersion,
  describeValue,
} from './option-checks';
import type { InferInput, InputSchema } from './validation';
import type { RunStarter, WorkflowDefinition, WorkflowHandler, WorkflowOptions } from './workflow-types';

export type * from './step-types';
export type * from './workflow-types';

let defaultClient: RunStarter | undefined;

/** Sets the client `workflow.run()` uses when no `client` option is given. */
export function setDefaultClient(client: RunStarter | undefined): void {
  defaultClient = client;
}

/** A set of workflow definitions, by name: what a worker executes and what a client validates against. */
export class WorkflowRegistry {
  private readonly byName = new Map<string, WorkflowDefinition<any, any>>();

  /**
   * @param howToDefine the sentence that tells the reader of an `UnknownWorkflowError` how to
   *   define and register a workflow (the Nest module speaks of `@Workflow()`).
   */
  constructor(readonly howToDefine?: string) {}

  /** The error for a workflow name that neither this registry nor Redis knows. */
  unknownWorkflow(name: string, where?: string): UnknownWorkflowError {
    return new UnknownWorkflowError(name, where, this.howToDefine);
  }

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

/** What a workflow name may be, as a sentence for error messages. */
export const WORKFLOW_NAME_RULE = 'Use 1-200 letters, digits, ".", ":", "-", "_" or "/", starting with a letter or digit.';

/**
 * True for a valid workflow name, wherever one is given (a definition, or a filter such as
 * `prune({ workflow })`): see WORKFLOW_NAME_RULE.
 */
export function isWorkflowName(name: unknown): name is string {
  return typeof name === 'string' && NAME.test(name);
}

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
  if (!isWorkflowName(name)) throw new ConfigurationError(`Workflow name ${JSON.stringify(name)} is invalid. ${WORKFLOW_NAME_RULE}`);
  assertWorkflowOptionKeys(`the options of workflow "${name}"`, options);
  if (typeof handler !== 'function') throw new ConfigurationError(`Workflow "${name}" needs a handler function, got ${typeof handler}.`);
  const queue = checkResourceName(options.queue ?? 'default', `queue of workflow "${name}"`);
  if (queue.includes('@')) {
    throw new ConfigurationError(
      `queue of workflow "${name}" must not contain "@", got ${JSON.stringify(queue)}: "<queue>@v<N>" is where runs of version N wait. Use "-", "_", "." or ":" instead.`,
    );
  }
  const version = checkWorkflowVersion(options.version ?? 1, `version of workflow "${name}"`);
  if (options.onNonDeterminism !== undefined && options.onNonDeterminism !== 'fail' && options.onNonDeterminism !== 'retry-latest') {
    throw new ConfigurationError(`onNonDeterminism of workflow "${name}" must be 'fail' or 'retry-latest', got ${describeValue(options.onNonDeterminism)}.`);
  }
  const maxAttempts = checkInteger(options.retries?.maxAttempts ?? options.maxAttempts ?? 1, `maxAttempts of workflow "${name}"`, 1, 1_000_000);
  const maxConcurrency = options.maxConcurrency;
  if (maxConcurrency !== undefined && maxConcurrency !== Infinity && (!Number.isInteger(maxConcurrency) || maxConcurrency < 1)) {
    throw new ConfigurationError(`maxConcurrency of workflow "${name}" must be an integer >= 1 or Infinity, got ${maxConcurrency}.`);
  }
  validateFlowControl(name, options);
  const definition: WorkflowDefinition<TInput, TOutput> = {
    name,
    queue,
    version,
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

/** A fixed flow-control key is checked here; one computed by a function is checked per run. */
function checkKeyOption(key: unknown, what: string): void {
  if (typeof key !== 'function') checkUserName(key, what);
}

function validateFlowControl(name: string, options: WorkflowOptions<InputSchema | undefined, any>): void {
  const of = `of workflow "${name}"`;
  const retryDelay = options.retries?.delay;
  if (retryDelay !== undefined && typeof retryDelay !== 'function') checkDuration(retryDelay, `retries.delay ${of}`, { allowZero: true });
  if (options.timeout !== undefined) checkRunTimeout(options.timeout, `timeout ${of}`);
  if (options.stepRetries !== undefined) checkStepRetry(options.stepRetries, `stepRetries ${of}`);
  if (options.mutex !== undefined) checkKeyOption(options.mutex, `mutex ${of}`);
  if (options.priority !== undefined) checkPriority(options.priority, `priority ${of}`);
  if (options.concurrency !== undefined) {
    const c = options.concurrency;
    if (!c || typeof c !== 'object' || c.key === undefined) {
      throw new ConfigurationError(
        `concurrency ${of} must be { key, limit }: a key (a string or (input) => string) and the most runs per key at once, got ${describeValue(c)}.`,
      );
    }
    checkInteger(c.limit, `concurrency.limit ${of}`, 1, 1_000_000);
    checkKeyOption(c.key, `concurrency.key ${of}`);
    if (c.scope !== undefined && c.scope !== 'workflow' && c.scope !== 'queue') {
      throw new ConfigurationError(`concurrency.scope ${of} must be 'workflow' or 'queue', got ${describeValue(c.scope)}.`);
    }
    if (options.priority) {
      throw new ConfigurationError(
        `Workflow "${name}" sets both concurrency (keys take turns) and priority: the runs of a keyed concurrency limit are claimed round robin by key, without priorities. Drop one of the two.`,
      );
    }
  }
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
  if (options.batch !== undefined) {
    const b = options.batch;
    if (!b || typeof b !== 'object') throw new ConfigurationError(`batch ${of} must be { maxSize, timeout, key? }, got ${describeValue(b)}.`);
    checkInteger(b.maxSize, `batch.maxSize ${of}`, 1, 1000);
    checkDuration(b.timeout, `batch.timeout ${of}`);
    if (b.key !== undefined) checkUserName(b.key, `batch.key ${of}`);
    if (!options.event?.length) {
      throw new ConfigurationError(
        `batch ${of} batches the events that start it, and it has none: add an event trigger (event: [{ name }], or @OnEvent(name) on the method), or drop batch.`,
      );
    }
  }
  for (const event of options.event ?? []) {
    if (!event || typeof event.name !== 'string' || !NAME.test(event.name)) {
      throw new ConfigurationError(`Event name ${JSON.stringify(event?.name)} of workflow "${name}" is invalid. Use the same characters as workflow names.`);
    }
  }
  (options.cancelOn ?? []).forEach((item, i) => {
    checkEventName(item?.event, `The event of cancelOn[${i}] of workflow "${name}"`);
    const match = item.match;
    const fieldList = typeof match === 'string' ? [match] : Array.isArray(match) ? match : undefined;
    if (fieldList) fieldList.forEach((field) => checkUserName(field, `A field of cancelOn[${i}].match of workflow "${name}"`));
    else if (match !== undefined && typeof match !== 'function') {
      throw new ConfigurationError(
        `cancelOn[${i}].match of workflow "${name}" must be a field name, a list of them or a function of the input, got ${describeValue(match)}.`,
      );
    }
  });
  const triggered = (options.event?.length ?? 0) > 0 || (options.cron?.length ?? 0) > 0;
  if (triggered && hasDynamicFlowKeys(options)) {
    throw new ConfigurationError(
      `Workflow "${name}" has ${options.event?.length ? 'event' : 'cron'} triggers and computes a mutex, concurrency, debounce, throttle or rate-limit key with a function. Runs started by an event or a cron tick are created inside Redis, where that function cannot run: give those options fixed keys, or start the workflow from a handler of the event that passes the key in its input.`,
    );
  }
  const ids = new Set<string>();
  (options.cron ?? []).forEach((trigger, i) => {
    const id = trigger.id === undefined ? `${name}#${i}` : checkCronId(trigger.id, `cron[${i}].id ${of}`);
    checkCronTrigger(name, trigger, `cron trigger "${id}" ${of}`);
    checkSchedulePolicies(trigger, `cron trigger "${id}" ${of}`);
    if (ids.has(id)) throw new ConfigurationError(`Cron id "${id}" is used twice in workflow "${name}". Give each cron trigger its own id.`);
    ids.add(id);
  });
}
