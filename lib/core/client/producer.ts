import { idempotencyTtlSec, timeOption } from '../definition/duration';
import { ConfigurationError, IdempotencyConflictError, UnknownWorkflowError } from '../errors';
import {
  assertKnownKeys,
  checkIdempotencyKey,
  checkResourceName,
  EMIT_EVENT_OPTION_KEYS,
  RUN_OPTION_KEYS,
} from '../definition/option-checks';
import { encodeInput, encodeJson } from '../store/serialization';
import { type EmitEventOptions, type RunHandle, type RunOptions } from '../definition/types';
import { dynamicFlowError, flowControlFor, type RunFlowControl } from '../definition/flow-control';
import { validateInput } from '../definition/validation';
import { checkEventName, type WorkflowDefinition } from '../definition/workflow';

import { RunHandles } from './run-handle';
import { newRunId } from './client-core';

/** Checks the options of starting a run before anything reaches Redis. */
function checkRunOptions(options: RunOptions | undefined): void {
  assertKnownKeys('run options', options, RUN_OPTION_KEYS);
  if (!options) return;
  if (options.idempotencyKey !== undefined) checkIdempotencyKey(options.idempotencyKey, 'idempotencyKey');
  if (options.queueOverride !== undefined) checkResourceName(options.queueOverride, 'queueOverride');
}

/** Producing runs: by definition, by name, and by events (now or at `emitAt`). */
export class RunProducer extends RunHandles {
  /** Starts a run of a defined workflow. Validates input first: nothing is stored when it fails. */
  async start<TInput, TOutput>(definition: WorkflowDefinition<TInput, TOutput>, input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>> {
    if (!definition || typeof definition.name !== 'string' || typeof definition.handler !== 'function') {
      throw new ConfigurationError(`start() needs a workflow definition (the value defineWorkflow returned), got ${definition === null ? 'null' : typeof definition}. Use runByName() to start a workflow by name.`);
    }
    checkRunOptions(options);
    await validateInput(definition.name, definition.options.schema, input);
    const flow = flowControlFor(definition as WorkflowDefinition<unknown, unknown>, input);
    return this.enqueue<TOutput>(definition.name, input, options?.queueOverride ?? definition.queue, String(definition.maxAttempts), options, flow, true);
  }

  /**
   * Starts a run by workflow name. A workflow in this client's registry is validated locally; any
   * other must have been registered in Redis by a worker, else `UnknownWorkflowError`.
   */
  async runByName<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    if (typeof name !== 'string' || !name) throw new ConfigurationError(`runByName needs a workflow name, got ${JSON.stringify(name)}.`);
    const definition = this.registry.get(name);
    if (definition) return this.start(definition, input, options) as Promise<RunHandle<TOutput>>;
    checkRunOptions(options);
    // Without the definition here, the registry entry's static flow-control keys apply.
    return this.enqueue<TOutput>(name, input, options?.queueOverride ?? '', '', options, flowControlFor(undefined, input), false);
  }

  /** Same as `runByName`. */
  emitWorkflow<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    return this.runByName<TOutput>(name, input, options);
  }

  protected async enqueue<TOutput>(
    workflow: string,
    input: unknown,
    queue: string,
    maxAttempts: string,
    options: RunOptions = {},
    flow: RunFlowControl,
    localFlow: boolean,
  ): Promise<RunHandle<TOutput>> {
    const encoded = encodeInput(workflow, input, `The input of workflow "${workflow}"`, this.maxPayloadBytes);
    const now = Date.now();
    const runAt = timeOption(options.runAt, 'runAt');
    const ttl = idempotencyTtlSec(options.idempotencyTtl);
    const result = await this.call(() => this.scripts.enqueue({
      runId: newRunId(),
      workflow,
      queue,
      maxAttempts,
      input: encoded,
      now,
      runAt,
      idempotencyKey: options.idempotencyKey === undefined ? '' : checkIdempotencyKey(options.idempotencyKey, 'idempotencyKey'),
      idempotencyTtlSec: ttl,
      debounce: flow.debounce,
      localFlow,
      extra: flow.extra,
    }));
    if (result.kind === 'unknown') throw new UnknownWorkflowError(workflow);
    if (result.kind === 'dynamic') throw dynamicFlowError(workflow);
    if (result.kind === 'conflict') throw new IdempotencyConflictError(workflow, options.idempotencyKey!, result.runId);
    return this.handle<TOutput>(result.runId);
  }

  /**
   * Emits an event: every workflow subscribed to it (option `event: [{ name }]`) gets a run with the
   * payload as input. Returns their run ids, or `[]` when `emitAt` is in the future (the fan-out
   * then happens when due). With `idempotencyKey`, a repeated emit returns the same runs.
   */
  async emitEvent(event: string, payload: unknown, options: EmitEventOptions = {}): Promise<string[]> {
    assertKnownKeys('emitEvent options', options, EMIT_EVENT_OPTION_KEYS);
    checkEventName(event, 'The event name of emitEvent');
    const { runIds } = await this.call(() => this.scripts.emitEvent({
      eventId: `ev${newRunId()}`,
      event,
      payload: encodeJson(payload, `The payload of event "${event}"`, this.maxPayloadBytes),
      now: Date.now(),
      emitAt: timeOption(options.emitAt, 'emitAt'),
      idempotencyKey: options.idempotencyKey === undefined ? '' : checkIdempotencyKey(options.idempotencyKey, 'emitEvent idempotencyKey'),
      idempotencyTtlSec: idempotencyTtlSec(options.idempotencyTtl),
    }));
    return runIds;
  }

  /** Emits an event at a later time; same as `emitEvent(event, payload, { emitAt, ... })`. */
  async scheduleEvent(event: string, payload: unknown, options: EmitEventOptions & { emitAt: Date | number }): Promise<string[]> {
    assertKnownKeys('scheduleEvent options', options, EMIT_EVENT_OPTION_KEYS);
    if (options?.emitAt === undefined) throw new ConfigurationError('scheduleEvent needs an emitAt option: the Date (or epoch ms) to fan the event out at.');
    return this.emitEvent(event, payload, options);
  }
}
