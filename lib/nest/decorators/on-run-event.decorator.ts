import { ConfigurationError, RUN_HOOK_EVENTS, type RunHookEventName } from '../../core';
import { assertKnownKeys, checkUserName } from '../../core/definition/option-checks';
import { REDFLOW_ON_RUN_EVENT } from '../redflow.constants';
import { methodLabel } from './workflow.decorator';

/** Options of `@OnRunEvent`. */
export interface OnRunEventOptions {
  /** Only runs of this workflow (or these workflows), by name. */
  workflow?: string | string[];
}

/** What `@OnRunEvent` stores on a method. */
export interface RunEventListenerMetadata {
  event: RunHookEventName;
  workflows?: string[];
}

/**
 * Calls the method when a run or step of this app's worker starts or ends, like
 * `@nestjs/bullmq`'s `@OnWorkerEvent`: `'run.started' | 'run.completed' | 'run.failed' |
 * 'run.canceled' | 'step.started' | 'step.completed' | 'step.failed'` receive the event
 * (`{ runId, workflow, attempt, ... }`), `'worker.error'` receives `(error, context)`. Works on any
 * provider method; not awaited, and what it throws is logged without harming the run. In process
 * only: it hears the runs this app's worker executes. Repeatable.
 */
export function OnRunEvent(event: RunHookEventName, options: OnRunEventOptions = {}): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    const where = `@OnRunEvent of ${methodLabel(target, key)}`;
    if (!Object.hasOwn(RUN_HOOK_EVENTS, event)) {
      throw new ConfigurationError(`${where}: unknown event ${JSON.stringify(event)}. Use one of ${Object.keys(RUN_HOOK_EVENTS).join(', ')}.`);
    }
    assertKnownKeys(`${where} options`, options, ['workflow']);
    let workflows: string[] | undefined;
    if (options.workflow !== undefined) {
      if (event === 'worker.error') throw new ConfigurationError(`${where}: 'worker.error' belongs to no workflow; drop the workflow option.`);
      workflows = (Array.isArray(options.workflow) ? options.workflow : [options.workflow]).map((name) => checkUserName(name, `${where} workflow`));
    }
    const listeners: RunEventListenerMetadata[] = Reflect.getMetadata(REDFLOW_ON_RUN_EVENT, descriptor.value) ?? [];
    Reflect.defineMetadata(REDFLOW_ON_RUN_EVENT, [...listeners, { event, workflows }], descriptor.value);
    return descriptor;
  };
}
