import { SetMetadata } from '@nestjs/common';

import type { InputSchema, WorkflowContext, WorkflowOptions } from '../../core';
import { assertWorkflowOptionKeys, optionKeys, WORKFLOW_OPTION_KEYS } from '../../core/definition/option-checks';
import { REDFLOW_WORKFLOW } from '../redflow.constants';

/** Options of `@Workflow`: the workflow options of `defineWorkflow`, with `input` for the schema; `F` names its `onFailure` method. */
export interface WorkflowDecoratorOptions<F extends string = string> extends Omit<
  WorkflowOptions<InputSchema | undefined, never>,
  'schema' | 'onFailure' | 'event' | 'cron'
> {
  /** @default "<Class>.<method>" */
  name?: string;
  /** A class-validator DTO class or a Standard Schema (zod, valibot, ...). */
  input?: InputSchema;
  /**
   * Called once when a run has failed for good: a function (called with `this` = the provider) or
   * the name of a method of the same provider.
   */
  onFailure?: F | ((ctx: { error: unknown; run: unknown; input: unknown }) => unknown);
}

/**
 * A method decorator for a class that has a method named `C`: naming a method the class does not
 * have (`compensate: 'refnud'`) does not compile. `C` is `never` (no such method needed) when no
 * name is given, and any class passes when the name is only known as a `string`.
 */
export type MethodOf<C extends string> = <T extends object>(
  target: T & (string extends C ? unknown : Record<C, (...args: never[]) => unknown>),
  key: string | symbol,
  descriptor: PropertyDescriptor,
) => PropertyDescriptor | void;

// The defineWorkflow options the decorator takes under another name or through another decorator.
const REPLACED: Readonly<Record<string, string>> = {
  schema: 'Pass the schema or DTO class as "input".',
  event: 'Add @OnEvent(name) to the method instead.',
  cron: 'Add @Cron(expression) to the method instead.',
};

/** Keys of `WorkflowDecoratorOptions`: those of `WORKFLOW_OPTION_KEYS` it keeps, plus `name` and `input`. */
export const WORKFLOW_DECORATOR_OPTION_KEYS = optionKeys<WorkflowDecoratorOptions>()([
  'name',
  'input',
  ...WORKFLOW_OPTION_KEYS.filter((key): key is Exclude<typeof key, 'schema' | 'event' | 'cron'> => !(key in REPLACED)),
]);

/**
 * Makes a provider method a workflow. The method receives the handler context
 * (`{ input, run, signal, step }`) and runs with `this` = the provider instance. Unknown options
 * (typos included) throw `ConfigurationError` when the class is decorated; an `onFailure` that
 * names no method of the class does not compile.
 */
export function Workflow<const F extends string = never>(nameOrOptions?: string | WorkflowDecoratorOptions<F>): MethodOf<F> {
  const options = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : (nameOrOptions ?? {});
  const decorate = SetMetadata(REDFLOW_WORKFLOW, options);
  return (target: object, key: string | symbol, descriptor: PropertyDescriptor) => {
    assertWorkflowOptionKeys(`@Workflow options of ${methodLabel(target, key)}`, options, WORKFLOW_DECORATOR_OPTION_KEYS, REPLACED);
    return decorate(target, key, descriptor);
  };
}

/** "Class.method" of a decorated method, for error messages (a static method's target is the class). */
export function methodLabel(target: object, key: string | symbol): string {
  const className = typeof target === 'function' ? target.name : target.constructor.name;
  return `${className}.${String(key)}`;
}

/** The name of a `@Workflow` method: its `name` option, else "<Class>.<method>". */
export function workflowName(options: WorkflowDecoratorOptions, className: string, method: string): string {
  return options.name ?? `${className}.${method}`;
}

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
