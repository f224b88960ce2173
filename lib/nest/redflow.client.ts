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
  type WorkflowContext,
  type WorkflowRegistry,
} from '../core';
import { validateSignalPayload, type SignalDefinition } from '../core/definition/signal-definition';
import { isConnection, openConnection } from '../core/store/connection';
import { workflowName } from './decorators/workflow.decorator';
import type { RedflowMetadataAccessor } from './redflow-metadata.accessor';
import { resolveRedflowOptions, type RedflowModuleOptions } from './redflow-options.interface';
import { REDFLOW_LOGGER_CONTEXT } from './redflow.constants';

/**
 * Method names of `T` whose first parameter is a `WorkflowContext`: the methods `@Workflow` can
 * decorate. Methods without parameters (`onModuleInit`, helpers), `onFailure` targets (their
 * context has no `step`) and methods taking anything else are left out.
 */
export type WorkflowMethodName<T> = {
  [K in keyof T]-?: T[K] extends (...args: infer A) => unknown
    ? A extends [infer C, ...unknown[]]
      ? [C] extends [WorkflowContext<unknown>]
        ? K
        : never
      : never
    : never;
}[keyof T] &
  string;

/** The input type of a workflow method. */
export type WorkflowInput<T, K extends keyof T> = T[K] extends (ctx: WorkflowContext<infer I>) => unknown ? I : never;

/** The output type of a workflow method. */
export type WorkflowOutput<T, K extends keyof T> = T[K] extends (...args: never[]) => infer R ? Awaited<R> : never;

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
  };
  const { redis, owned } = isConnection(connection)
    ? openConnection({ redis: connection })
    : typeof connection === 'object'
      ? openConnection({ redisOptions: connection })
      : openConnection({ url: connection });
  return new RedflowClient(redis, owned, clientOptions, accessor);
}
