import { Logger, type Type } from '@nestjs/common';
import { Cluster, Redis } from 'ioredis';
import {
  ConfigurationError,
  WorkflowClient,
  type ClientOptions,
  type RedisConnection,
  type RunHandle,
  type RunOptions,
  type WorkflowContext,
  type WorkflowRegistry,
} from '../core';
import { openConnection } from '../core/store/connection';
import { resolveRedflowOptions, type RedflowModuleOptions } from './redflow-options.interface';
import { REDFLOW_LOGGER_CONTEXT } from './redflow.constants';
import { workflowName } from './decorators/workflow.decorator';
import type { RedflowMetadataAccessor } from './redflow-metadata.accessor';

/** Method names of `T` that take a workflow handler context. */
export type WorkflowMethodName<T> = {
  [K in keyof T]-?: T[K] extends (ctx: WorkflowContext<never>) => unknown ? K : never;
}[keyof T] &
  string;

/** The input type of a workflow method. */
export type WorkflowInput<T, K extends keyof T> = T[K] extends (ctx: WorkflowContext<infer I>) => unknown ? I : never;

/** The output type of a workflow method. */
export type WorkflowOutput<T, K extends keyof T> = T[K] extends (...args: never[]) => infer R ? Awaited<R> : never;

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
    const handler = (workflowClass.prototype as Record<string, unknown>)[method] as ((...args: never[]) => unknown) | undefined;
    const metadata = handler && this.accessor.getWorkflow(handler);
    if (!metadata) {
      throw new ConfigurationError(`${workflowClass.name}.${method} is not a @Workflow method. Decorate it with @Workflow() or start a workflow by name with runByName().`);
    }
    return this.runByName(workflowName(metadata, workflowClass.name, method), input, options);
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
    commandTimeoutMs: options.commandTimeoutMs,
    requireNoEviction: options.redis?.requireNoEviction,
    logger: new Logger(REDFLOW_LOGGER_CONTEXT),
  };
  const { redis, owned } =
    connection instanceof Redis || connection instanceof Cluster
      ? openConnection({ redis: connection })
      : typeof connection === 'object'
        ? openConnection({ redisOptions: connection })
        : openConnection({ url: connection });
  return new RedflowClient(redis, owned, clientOptions, accessor);
}
