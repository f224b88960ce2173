import { parseCalendarRule } from '../definition/calendar-rule';
import {
  checkScheduleBounds,
  checkSchedulePolicies,
  decodeCron,
  encodeCron,
  MIN_EVERY_MS,
  nextTickOf,
  parseCron,
  policiesOf,
  runtimeCronId,
  type CronSchedule,
} from '../definition/cron';
import { idempotencyTtlSec, timeOption } from '../definition/duration';
import { eventFields } from '../definition/event-match';
import { dynamicFlowError, flowControlFor, hasDynamicFlowKeys, withRunPriority, type RunFlowControl } from '../definition/flow-control';
import {
  assertKnownKeys,
  checkDuration,
  checkIdempotencyKey,
  checkResourceName,
  checkRunTimeout,
  checkUserName,
  checkWorkflowVersion,
  describeValue,
  EMIT_EVENT_OPTION_KEYS,
  parseVersionQueue,
  RUN_OPTION_KEYS,
  SCHEDULE_OPTION_KEYS,
  versionQueue,
} from '../definition/option-checks';
import type { EmitEventOptions, RunOptions } from '../definition/run-options';
import type { RunHandle } from '../definition/run-types';
import type { ScheduleOptions, ScheduleState } from '../definition/schedule-types';
import { validateInput } from '../definition/validation';
import { checkEventName, type WorkflowDefinition } from '../definition/workflow';
import { ConfigurationError, IdempotencyConflictError, InputValidationError } from '../errors';
import { traceFields } from '../store/run-record';
import type { EnqueueArgs } from '../store/run-scripts';
import { encodeInput, encodeJson } from '../store/serialization';
import { newRunId, type ClientContext } from './client-context';
import type { RunWaiter } from './run-waiter';

/** Checks the options of starting a run before anything reaches Redis. */
function checkRunOptions(options: RunOptions | undefined): void {
  assertKnownKeys('run options', options, RUN_OPTION_KEYS);
  if (!options) return;
  if (options.idempotencyKey !== undefined) checkIdempotencyKey(options.idempotencyKey, 'idempotencyKey');
  if (options.queueOverride !== undefined) checkResourceName(options.queueOverride, 'queueOverride');
  if (options.timeout !== undefined) checkRunTimeout(options.timeout, 'timeout of the run options');
  if (options.version !== undefined) checkWorkflowVersion(options.version, 'The run option version');
}

/**
 * The run fields a new run carries: the flow control's, with the run's own `timeout` in place of
 * the workflow's. Without the definition the script adds the registry's timeout first, and a
 * field sent twice in one HSET keeps the later value, so the run's own one wins there too.
 */
/** The most items, and about the most bytes of input, of one `enqueue-many` call. */
const MANY_CHUNK_ITEMS = 500;
const MANY_CHUNK_BYTES = 8 * 1024 * 1024;

/** `runMany`'s runs in chunks of one script call each. */
function runChunks(runs: EnqueueArgs[]): EnqueueArgs[][] {
  const chunks: EnqueueArgs[][] = [];
  let chunk: EnqueueArgs[] = [];
  let bytes = 0;
  for (const run of runs) {
    if (chunk.length && (chunk.length >= MANY_CHUNK_ITEMS || bytes + run.input.length > MANY_CHUNK_BYTES)) {
      chunks.push(chunk);
      chunk = [];
      bytes = 0;
    }
    chunk.push(run);
    bytes += run.input.length;
  }
  if (chunk.length) chunks.push(chunk);
  return chunks;
}

function runFields(workflow: string, flow: RunFlowControl, options: RunOptions): string[] {
  const withPriority = withRunPriority(flow.extra, options.priority, workflow, 'the run options');
  if (options.timeout === undefined) return withPriority;
  const extra: string[] = [];
  for (let i = 0; i < withPriority.length; i += 2) if (withPriority[i] !== 'timeout') extra.push(withPriority[i], withPriority[i + 1]);
  extra.push('timeout', String(checkRunTimeout(options.timeout, 'timeout of the run options')));
  return extra;
}

/** The tick schedule of `schedule(id, options)`: exactly one of `cron`, `every` and `rrule`, checked. */
function checkSchedule(id: string, options: ScheduleOptions): CronSchedule {
  const of = `of schedule "${id}"`;
  const given = (['cron', 'every', 'rrule'] as const).filter((k) => options[k] !== undefined);
  if (given.length !== 1) {
    throw new ConfigurationError(
      `Schedule "${id}" needs exactly one of cron (an expression such as "0 9 * * 1-5"), every (an interval such as "30s") and rrule (an RFC 5545 rule), got ${given.length ? given.join(' and ') : 'none'}.`,
    );
  }
  if (options.rrule !== undefined) {
    if (options.timezone !== undefined) {
      throw new ConfigurationError(
        `timezone ${of} applies to a cron expression only; give a calendar rule its time zone in its DTSTART line (DTSTART;TZID=Europe/Paris:...).`,
      );
    }
    parseCalendarRule(options.rrule, `rrule ${of}`);
    return { rrule: options.rrule };
  }
  if (options.every !== undefined) {
    if (options.timezone !== undefined)
      throw new ConfigurationError(`timezone ${of} applies to a cron expression only; an every schedule ticks on multiples of its interval.`);
    const every = checkDuration(options.every, `every ${of}`);
    if (every < MIN_EVERY_MS) throw new ConfigurationError(`every ${of} must be at least 1 s (1000 ms), got ${describeValue(options.every)}.`);
    return { every };
  }
  if (typeof options.cron !== 'string' || !options.cron.trim()) {
    throw new ConfigurationError(`cron ${of} must be a cron expression such as "0 9 * * 1-5", got ${describeValue(options.cron)}.`);
  }
  if (options.timezone !== undefined && (typeof options.timezone !== 'string' || !options.timezone)) {
    throw new ConfigurationError(`timezone ${of} must be an IANA time zone name such as "Europe/Paris", got ${describeValue(options.timezone)}.`);
  }
  const schedule = { expression: options.cron, timezone: options.timezone };
  parseCron(options.workflow, schedule);
  return schedule;
}

/** The error for scheduling a workflow whose runs need a key function to start. */
function scheduleDynamicError(id: string, workflow: string): ConfigurationError {
  return new ConfigurationError(
    `Schedule "${id}" cannot start workflow "${workflow}": it computes a mutex, concurrency, debounce, throttle or rate-limit key from its input with a function, and the runs of a schedule are created inside Redis, where that function cannot run. Give those options fixed keys, or schedule a workflow that starts "${workflow}" with the key in its input.`,
  );
}

/**
 * Producing runs: by definition, by name, by events (now or at `emitAt`), and by runtime
 * schedules. Its public methods are documented where `WorkflowClient` forwards to them.
 */
export class RunProducer {
  constructor(
    private readonly ctx: ClientContext,
    private readonly waiter: RunWaiter,
  ) {}

  async start<TInput, TOutput>(definition: WorkflowDefinition<TInput, TOutput>, input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>> {
    if (!definition || typeof definition.name !== 'string' || typeof definition.handler !== 'function') {
      throw new ConfigurationError(
        `start() needs a workflow definition (the value defineWorkflow returned), got ${definition === null ? 'null' : typeof definition}. Use runByName() to start a workflow by name.`,
      );
    }
    checkRunOptions(options);
    await validateInput(definition.name, definition.options.schema, input);
    const flow = flowControlFor(definition as WorkflowDefinition<unknown, unknown>, input);
    const queue = versionQueue(options?.queueOverride ?? definition.queue, options?.version ?? definition.version);
    return this.enqueue<TOutput>(definition.name, input, queue, String(definition.maxAttempts), options, flow, true);
  }

  /**
   * The queue of a run by name without its definition: '' (the registry entry's, i.e. the latest
   * registered version), or for a pinned `version` that version's queue on the workflow's queue
   * (or `queueOverride`), which reads the registry entry first.
   */
  private async queueByName(name: string, options: RunOptions | undefined): Promise<string> {
    if (options?.version === undefined) return options?.queueOverride ?? '';
    let queue = options.queueOverride;
    if (queue === undefined) {
      const stored = await this.ctx.call(() => this.ctx.registryQueries.workflowQueue(name));
      if (!stored) throw this.ctx.registry.unknownWorkflow(name);
      queue = parseVersionQueue(stored).queue;
    }
    return versionQueue(queue, options.version);
  }

  async runByName<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    if (typeof name !== 'string' || !name) throw new ConfigurationError(`runByName needs a workflow name, got ${JSON.stringify(name)}.`);
    const definition = this.ctx.registry.get(name);
    if (definition) return this.start(definition, input, options) as Promise<RunHandle<TOutput>>;
    checkRunOptions(options);
    // Without the definition here, the registry entry's static flow-control keys apply.
    return this.enqueue<TOutput>(name, input, await this.queueByName(name, options), '', options, flowControlFor(undefined, input), false);
  }

  async runManyByName<TOutput = unknown>(name: string, items: ReadonlyArray<{ input: unknown; options?: RunOptions }>): Promise<Array<RunHandle<TOutput>>> {
    if (typeof name !== 'string' || !name) throw new ConfigurationError(`runManyByName needs a workflow name, got ${JSON.stringify(name)}.`);
    if (!Array.isArray(items)) throw new ConfigurationError(`runMany needs an array of { input, options? }, got ${describeValue(items)}.`);
    const definition = this.ctx.registry.get(name) as WorkflowDefinition<unknown, unknown> | undefined;
    // Every item is checked, and made ready to store, before the first is stored.
    const runs = await Promise.all(
      items.map(async (item: unknown, i) => {
        if (item === null || typeof item !== 'object')
          throw new ConfigurationError(`Item ${i} of runMany for workflow "${name}" must be an object such as { input }, got ${describeValue(item)}.`);
        assertKnownKeys(`item ${i} of runMany for workflow "${name}"`, item, ['input', 'options']);
        const { input, options = {} } = item as { input: unknown; options?: RunOptions };
        checkRunOptions(options);
        try {
          if (definition) await validateInput(name, definition.options.schema, input);
        } catch (error) {
          if (error instanceof InputValidationError)
            throw new InputValidationError(name, error.issues, `The input of item ${i} of runMany for workflow "${name}"`);
          throw error;
        }
        const what = `The input of item ${i} of runMany for workflow "${name}"`;
        if (!definition) return this.prepareRun(name, input, await this.queueByName(name, options), '', options, flowControlFor(undefined, input), false, what);
        const queue = versionQueue(options.queueOverride ?? definition.queue, options.version ?? definition.version);
        return this.prepareRun(name, input, queue, String(definition.maxAttempts), options, flowControlFor(definition, input), true, what);
      }),
    );
    const handles: Array<RunHandle<TOutput>> = [];
    // One script call per chunk, each all or nothing: 1,000 items of a few KiB are two calls.
    for (const chunk of runChunks(runs)) {
      const result = await this.ctx.call(() => this.ctx.scripts.enqueueMany(chunk, this.ctx.clock.now()));
      if ('failed' in result) {
        const { kind, index, runId } = result.failed;
        const item = handles.length + index;
        if (kind === 'unknown') throw this.ctx.registry.unknownWorkflow(name);
        if (kind === 'dynamic') throw dynamicFlowError(name);
        throw new IdempotencyConflictError(name, items[item].options!.idempotencyKey!, runId);
      }
      for (const run of result.runs) handles.push(this.waiter.handle<TOutput>(run.runId));
    }
    return handles;
  }

  emitWorkflow<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    return this.runByName<TOutput>(name, input, options);
  }

  private async enqueue<TOutput>(
    workflow: string,
    input: unknown,
    queue: string,
    maxAttempts: string,
    options: RunOptions = {},
    flow: RunFlowControl,
    localFlow: boolean,
  ): Promise<RunHandle<TOutput>> {
    const run = this.prepareRun(workflow, input, queue, maxAttempts, options, flow, localFlow);
    const result = await this.ctx.call(() => this.ctx.scripts.enqueue(run));
    if (result.kind === 'unknown') throw this.ctx.registry.unknownWorkflow(workflow);
    if (result.kind === 'dynamic') throw dynamicFlowError(workflow);
    if (result.kind === 'conflict') throw new IdempotencyConflictError(workflow, options.idempotencyKey!, result.runId);
    return this.waiter.handle<TOutput>(result.runId);
  }

  /** A run as the enqueue scripts take it, every argument checked: bad input is reported as such even when Redis is down. */
  private prepareRun(
    workflow: string,
    input: unknown,
    queue: string,
    maxAttempts: string,
    options: RunOptions,
    flow: RunFlowControl,
    localFlow: boolean,
    what = `The input of workflow "${workflow}"`,
  ): EnqueueArgs {
    const encoded = this.ctx.payloads.seal(encodeInput(workflow, input, what, this.ctx.maxPayloadBytes), { kind: 'input' });
    // The caller's trace context goes into the run hash with the run's other fields, in the same script.
    const trace = this.ctx.tracing?.inject();
    return {
      runId: newRunId(),
      workflow,
      queue,
      maxAttempts,
      input: encoded,
      now: this.ctx.clock.now(),
      runAt: timeOption(options.runAt, 'runAt'),
      idempotencyKey: options.idempotencyKey === undefined ? '' : checkIdempotencyKey(options.idempotencyKey, 'idempotencyKey'),
      idempotencyTtlSec: idempotencyTtlSec(options, 'the start options'),
      debounce: flow.debounce,
      localFlow,
      extra: trace ? [...runFields(workflow, flow, options), ...traceFields(trace)] : runFields(workflow, flow, options),
    };
  }

  async schedule(id: string, options: ScheduleOptions): Promise<ScheduleState> {
    checkUserName(id, 'The schedule id');
    assertKnownKeys(`the options of schedule "${id}"`, options, SCHEDULE_OPTION_KEYS);
    if (options === undefined) throw new ConfigurationError(`schedule("${id}") needs options: { workflow, cron or every, input?, timezone? }.`);
    const { workflow } = options;
    if (typeof workflow !== 'string' || !workflow)
      throw new ConfigurationError(`workflow of schedule "${id}" must be a workflow name, got ${describeValue(workflow)}.`);
    const tick = checkSchedule(id, options);
    const policies = { ...checkSchedulePolicies(options, `schedule "${id}"`), ...checkScheduleBounds(options, `schedule "${id}"`) };
    const input = options.input ?? null;
    const definition = this.ctx.registry.get(workflow);
    if (definition) {
      if (hasDynamicFlowKeys(definition.options)) throw scheduleDynamicError(id, workflow);
      await validateInput(workflow, definition.options.schema, input);
    }
    // As stored: what JSON makes of it (Dates become strings), checked for size and JSON-safety.
    const json = encodeInput(workflow, input, `The input of schedule "${id}"`, this.ctx.maxPayloadBytes);
    const stored = JSON.parse(json) as unknown;
    // Sealed (payloads.ts) when there is a codec: the stored input is then an envelope string.
    const def = encodeCron(workflow, { ...tick, input: JSON.parse(this.ctx.payloads.seal(json, { kind: 'input' })) }, policies);
    const schedule = {
      cronId: runtimeCronId(id),
      def,
      next: nextTickOf(decodeCron(def), this.ctx.clock.now()),
      workflow,
      local: definition !== undefined,
    };
    const result = await this.ctx.call(() => this.ctx.scripts.schedule(schedule));
    if (result.outcome === 'unknown') throw this.ctx.registry.unknownWorkflow(workflow);
    if (result.outcome === 'dynamic') throw scheduleDynamicError(id, workflow);
    const shape = 'every' in tick ? { every: tick.every } : 'rrule' in tick ? { rrule: tick.rrule } : { cron: tick.expression, timezone: tick.timezone };
    const given = policiesOf(decodeCron(def));
    return { id, workflow, ...shape, input: stored, nextAt: result.nextAt, ...(given && { policies: given }) };
  }

  async unschedule(id: string): Promise<boolean> {
    checkUserName(id, 'The schedule id');
    return this.ctx.call(() => this.ctx.scripts.unschedule(runtimeCronId(id)));
  }

  async emitEvent(event: string, payload: unknown, options: EmitEventOptions = {}): Promise<string[]> {
    assertKnownKeys('emitEvent options', options, EMIT_EVENT_OPTION_KEYS);
    checkEventName(event, 'The event name of emitEvent');
    // Every argument is checked before the call: bad input is reported as such even when Redis is down.
    const emit = {
      eventId: `ev${newRunId()}`,
      event,
      payload: this.ctx.payloads.seal(encodeJson(payload, `The payload of event "${event}"`, this.ctx.maxPayloadBytes), { kind: 'event' }),
      fields: eventFields(payload, this.ctx.payloads),
      now: this.ctx.clock.now(),
      emitAt: timeOption(options.emitAt, 'emitAt'),
      idempotencyKey: options.idempotencyKey === undefined ? '' : checkIdempotencyKey(options.idempotencyKey, 'emitEvent idempotencyKey'),
      idempotencyTtlSec: idempotencyTtlSec(options, 'emitEvent options'),
    };
    const { runIds } = await this.ctx.call(() => this.ctx.scripts.emitEvent(emit));
    return runIds;
  }

  async scheduleEvent(event: string, payload: unknown, options: EmitEventOptions & { emitAt: Date | number }): Promise<string[]> {
    assertKnownKeys('scheduleEvent options', options, EMIT_EVENT_OPTION_KEYS);
    if (options?.emitAt === undefined) throw new ConfigurationError('scheduleEvent needs an emitAt option: the Date (or epoch ms) to fan the event out at.');
    return this.emitEvent(event, payload, options);
  }
}
