import type { Type } from '@nestjs/common';

import { ConfigurationError, RUN_HOOK_EVENTS, type RunHookEventName } from '../../core';
import { assertKnownKeys, checkUserName } from '../../core/definition/option-checks';
import { REDFLOW_ON_RUN_EVENT } from '../redflow.constants';
import { methodLabel, type WorkflowMethodName } from './workflow.decorator';

/** Options of `@OnRunEvent`; `T` is the workflow class given as `workflow`, if any. */
export interface OnRunEventOptions<T = unknown> {
  /**
   * Only runs of these workflows: a name or names, or a `@Workflow` provider class (every
   * workflow of it, or only `method`). A class, and its method, are checked by the compiler and
   * resolved to workflow names at startup.
   */
  workflow?: string | string[] | Type<T>;
  /** With a class as `workflow`: only this `@Workflow` method of it. */
  method?: WorkflowMethodName<T>;
}

/** What `@OnRunEvent` stores on a method. */
export interface RunEventListenerMetadata {
  event: RunHookEventName;
  /** The workflow names it hears, resolved at startup when given as a class; undefined: all. */
  workflows?: string[];
  /** The workflow class (and method) it was given, resolved to `workflows` by the explorer. */
  workflowClass?: { type: Type<unknown>; method?: string };
}

/**
 * Calls the method when a run or step of this app's worker starts or ends, like
 * `@nestjs/bullmq`'s `@OnWorkerEvent`: `'run.started' | 'run.completed' | 'run.failed' |
 * 'run.canceled' | 'step.started' | 'step.completed' | 'step.failed'` receive the event
 * (`{ runId, workflow, attempt, ... }`), `'worker.error'` receives `(error, context)`. Works on any
 * provider method; not awaited, and what it throws is logged without harming the run. In process
 * only: it hears the runs this app's worker executes. Repeatable.
 */
export function OnRunEvent<T = unknown>(event: RunHookEventName, options: OnRunEventOptions<T> = {}): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    const where = `@OnRunEvent of ${methodLabel(target, key)}`;
    if (!Object.hasOwn(RUN_HOOK_EVENTS, event)) {
      throw new ConfigurationError(`${where}: unknown event ${JSON.stringify(event)}. Use one of ${Object.keys(RUN_HOOK_EVENTS).join(', ')}.`);
    }
    assertKnownKeys(`${where} options`, options, ['workflow', 'method']);
    let workflows: string[] | undefined;
    let workflowClass: RunEventListenerMetadata['workflowClass'];
    if (options.workflow !== undefined && event === 'worker.error') {
      throw new ConfigurationError(`${where}: 'worker.error' belongs to no workflow; drop the workflow option.`);
    }
    if (typeof options.workflow === 'function') {
      if (options.method !== undefined && typeof options.method !== 'string') {
        throw new ConfigurationError(`${where} method must name a @Workflow method of ${options.workflow.name}, got ${typeof options.method}.`);
      }
      workflowClass = { type: options.workflow, method: options.method };
    } else {
      if (options.method !== undefined) {
        throw new ConfigurationError(
          `${where} has a method but no workflow class: give the class as workflow, e.g. { workflow: BillingWorkflows, method: 'bill' }.`,
        );
      }
      if (options.workflow !== undefined) {
        workflows = (Array.isArray(options.workflow) ? options.workflow : [options.workflow]).map((name) => checkUserName(name, `${where} workflow`));
      }
    }
    const listeners: RunEventListenerMetadata[] = Reflect.getMetadata(REDFLOW_ON_RUN_EVENT, descriptor.value) ?? [];
    Reflect.defineMetadata(REDFLOW_ON_RUN_EVENT, [...listeners, { event, workflows, workflowClass }], descriptor.value);
    return descriptor;
  };
}
