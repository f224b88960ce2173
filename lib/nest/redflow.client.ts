import { Logger, type Type } from '@nestjs/common';

import {
  ConfigurationError,
  WorkflowClient,
  type ClientOptions,
  type InferInput,
  type InputSchema,
  type RedisConnection,
  type RunHandle,
  type RunOptions,
  type ScheduleOptions,
  type ScheduleState,
  type WorkflowRegistry,
} from '../core';
import { validateSignalPayload, type SignalDefinition } from '../core/definition/signal-definition';
import { isConnection, openConnection } from '../core/store/connection';
import { workflowName, type WorkflowInput, type WorkflowMethodName, type WorkflowOutput } from './decorators/workflow.decorator';
import type { RedflowMetadataAccessor } from './redflow-metadata.accessor';
import { resolveRedflowOptions, type RedflowModuleOptions } from './redflow-options.interface';
import { REDFLOW_LOGGER_CONTEXT } from './redflow.constants';

export type { WorkflowInput, WorkflowMethodName, WorkflowOutput } from './decorators/workflow.decorator';

/** The options of a schedule of one typed workflow: `ScheduleOptions` without `workflow`, with a typed `input`. */
export type TypedScheduleOptions<TInput> = Omit<ScheduleOptions, 'workflow' | 'input'> & { input?: TInput };

/**
 * A workflow provider class that declares the signals its runs take, as a static member:
 * `static readonly signals = { approve: ApproveDto }` (DTO classes or Standard Schemas).
 */
export type WorkflowClassWithSignals = Type<unknown> & { readonly signals: Readonly<Record<string, InputSchema>> };

/** The payload type of signal `N` of a workflow class. */
export type SignalPayload<C extends WorkflowClassWithSignals, N extends keyof C['signals']> = InferInput<C['signals'][N]>;

/**
 * The client of `RedflowModule`, injectable by class. Everything `createClient()` gives, plus
 * `run(WorkflowClass, 'method', input)`, which type-checks the method name and its input.
 */
export class RedflowClient extends WorkflowClient {
  constructor(
    redis: RedisConnection,
    ownsConnection: boolean,
    options: ClientOptions,
    private readonly accessor: RedflowMetadataAccessor,
  ) {
    super(redis, ownsConnection, options);
  }

  /** Starts a run of the `@Workflow` method `method` of `workflowClass`. */
  run<T, K extends WorkflowMethodName<T>>(
    workflowClass: Type<T>,
    method: K,
    input: WorkflowInput<T, K>,
    options?: RunOptions,
  ): Promise<RunHandle<WorkflowOutput<T, K>>> {
    return this.runByName(this.workflowNameOf(workflowClass, method), input, options);
  }

  /**
   * Adds (or replaces) a runtime schedule (see `WorkflowClient.schedule`). Given the workflow
   * class and method instead of a name, the method and the input are type-checked:
   * `schedule('nightly', ReportWorkflows, 'build', { cron: '0 3 * * *', input: { full: true } })`.
   */
  override schedule(id: string, options: ScheduleOptions): Promise<ScheduleState>;
  override schedule<T, K extends WorkflowMethodName<T>>(
    id: string,
    workflowClass: Type<T>,
    method: K,
    options: TypedScheduleOptions<WorkflowInput<T, K>>,
  ): Promise<ScheduleState>;
  override async schedule(id: string, ...args: unknown[]): Promise<ScheduleState> {
    if (typeof args[0] !== 'function') return super.schedule(id, args[0] as ScheduleOptions);
    const [workflowClass, method, options] = args as [Type<unknown>, string, TypedScheduleOptions<unknown>];
    return super.schedule(id, { ...options, workflow: this.workflowNameOf(workflowClass, method as never) });
  }

  /**
   * The workflow name of the `@Workflow` method `method` of `workflowClass`: its `name` option, or
   * "<Class>.<method>". Throws `ConfigurationError` when the method is not a `@Workflow`.
   */
  workflowNameOf<T>(workflowClass: Type<T>, method: WorkflowMethodName<T>): string {
    const handler = (workflowClass.prototype as Record<string, unknown>)[method] as ((...args: never[]) => unknown) | undefined;
    const metadata = handler && this.accessor.getWorkflow(handler);
    if (!metadata) {
      throw new ConfigurationError(
        `${workflowClass.name}.${method} is not a @Workflow method. Decorate it with @Workflow() or start a workflow by name with runByName().`,
      );
    }
    return workflowName(metadata, workflowClass.name, method);
  }

  /**
   * Sends a signal to a run (see `WorkflowClient.signal`). Given the workflow class first, the
   * signal name and payload are type-checked against the class's static `signals`, and the payload
   * is validated by its DTO or schema before it is sent (`InputValidationError`, nothing sent).
   */
  override signal(runId: string, name: string, payload?: unknown): Promise<boolean>;
  override signal<T>(runId: string, signal: SignalDefinition<T>, payload: T): Promise<boolean>;
  override signal<C extends WorkflowClassWithSignals, N extends keyof C['signals'] & string>(
    workflowClass: C,
    runId: string,
    name: N,
    payload: SignalPayload<C, N>,
  ): Promise<boolean>;
  override async signal(...args: unknown[]): Promise<boolean> {
    if (typeof args[0] !== 'function') return super.signal(args[0] as string, args[1] as string, args[2]);
    const [workflowClass, runId, name, payload] = args as [WorkflowClassWithSignals, string, string, unknown];
    const declared = (workflowClass as Partial<WorkflowClassWithSignals>).signals;
    const schema = declared && Object.prototype.hasOwnProperty.call(declared, name) ? declared[name] : undefined;
    if (!schema) {
      const known = declared ? Object.keys(declared).join(', ') || 'none' : 'none';
      throw new ConfigurationError(
        `${workflowClass.name} declares no signal "${name}" (declared: ${known}). Add it to its static signals, e.g. static readonly signals = { ${name}: PayloadDto }.`,
      );
    }
    const valid = await validateSignalPayload(`signal "${name}" of ${workflowClass.name}`, workflowClass.name, schema, payload);
    return super.signal(runId, name, valid);
  }
}

/** Builds the module's client from its connection option (a URL or options are owned and closed). */
export function createRedflowClient(options: RedflowModuleOptions, registry: WorkflowRegistry, accessor: RedflowMetadataAccessor): RedflowClient {
  // Bad options fail here, before a connection is opened (and then left open).
  resolveRedflowOptions(options);
  const { connection } = options;
  const clientOptions: ClientOptions = {
    prefix: options.prefix,
    registry,
    maxPayloadBytes: options.maxPayloadBytes,
    commandTimeout: options.commandTimeout,
    commandTimeoutMs: options.commandTimeoutMs,
    requireNoEviction: options.redis?.requireNoEviction,
    logger: new Logger(REDFLOW_LOGGER_CONTEXT),
    clock: options.clock,
    events: options.events,
    tracing: options.tracing,
    codec: options.codec,
  };
  const { redis, owned } = isConnection(connection)
    ? openConnection({ redis: connection })
    : typeof connection === 'object'
      ? openConnection({ redisOptions: connection })
      : openConnection({ url: connection });
  return new RedflowClient(redis, owned, clientOptions, accessor);
}
