import { SetMetadata } from '@nestjs/common';
import type { InputSchema, WorkflowOptions } from '../../core';
import { REDFLOW_WORKFLOW } from '../redflow.constants';

/** Options of `@Workflow`: the workflow options of `defineWorkflow`, with `input` for the schema. */
export interface WorkflowDecoratorOptions
  extends Omit<WorkflowOptions<InputSchema | undefined, never>, 'schema' | 'onFailure' | 'event' | 'cron'> {
  /** @default "<Class>.<method>" */
  name?: string;
  /** A class-validator DTO class or a Standard Schema (zod, valibot, ...). */
  input?: InputSchema;
  /**
   * Called once when a run has failed for good: a function (called with `this` = the provider) or
   * the name of a method of the same provider.
   */
  onFailure?: string | ((ctx: { error: unknown; run: unknown; input: unknown }) => unknown);
}

/**
 * Makes a provider method a workflow. The method receives the handler context
 * (`{ input, run, signal, step }`) and runs with `this` = the provider instance.
 */
export function Workflow(nameOrOptions?: string | WorkflowDecoratorOptions): MethodDecorator {
  const options = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : (nameOrOptions ?? {});
  return SetMetadata(REDFLOW_WORKFLOW, options);
}

/** The name of a `@Workflow` method: its `name` option, else "<Class>.<method>". */
export function workflowName(options: WorkflowDecoratorOptions, className: string, method: string): string {
  return options.name ?? `${className}.${method}`;
}
