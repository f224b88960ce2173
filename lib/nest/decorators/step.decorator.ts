import type { Duration, RunStepOptions, StepRetryPolicy } from '../../core';
import { assertKnownKeys, checkDuration, checkHeartbeatTimeout, checkStepRetry, checkUserName, RUN_STEP_OPTION_KEYS } from '../../core/definition/option-checks';
import { REDFLOW_STEP } from '../redflow.constants';
import { runAsStep } from '../step-context';
import { methodLabel } from './workflow.decorator';

/** Options of `@Step`. */
export interface StepDecoratorOptions {
  /** @default the method name */
  name?: string;
  timeoutMs?: number;
  /** Retries this step by its own policy before the run-level retry applies (see `step.run`). */
  retries?: StepRetryPolicy;
  /**
   * Fails a try with `StepHeartbeatTimeoutError` when the method goes this long without calling
   * `currentStep()?.heartbeat()` (see `step.run`); `retries` then apply. @default no heartbeat check
   */
  heartbeatTimeout?: Duration;
}

/**
 * Makes every call of this method inside a running workflow a durable step (`step.run`
 * semantics: stored once, replayed afterwards; repeated calls get `#2`, `#3` suffixes). Called
 * outside a run, the method just runs. Unknown options, a name with `#` or `|`, or an invalid
 * `timeoutMs` or `heartbeatTimeout` throw `ConfigurationError` when the class is decorated.
 */
export function Step(nameOrOptions?: string | StepDecoratorOptions): MethodDecorator {
  return (target, key, descriptor: PropertyDescriptor) => {
    const where = methodLabel(target, key);
    const options = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : (nameOrOptions ?? {});
    assertKnownKeys(`@Step options of ${where}`, options, RUN_STEP_OPTION_KEYS);
    if (options.retries !== undefined) checkStepRetry(options.retries, `@Step retries of ${where}`);
    if (options.heartbeatTimeout !== undefined) checkHeartbeatTimeout(options.heartbeatTimeout, `@Step heartbeatTimeout of ${where}`);
    const name = checkUserName(options.name ?? String(key), `@Step name of ${where}`, {
      forbid: '#|',
      reason: '"#" is reserved for the "#2" suffix of repeated calls and "|" separates stored fields; choose another character',
    });
    const stepOptions: RunStepOptions = {
      name,
      timeoutMs: options.timeoutMs === undefined ? undefined : checkDuration(options.timeoutMs, `@Step timeoutMs of ${where}`, { timer: true }),
      ...(options.retries === undefined ? {} : { retries: options.retries }),
      ...(options.heartbeatTimeout === undefined ? {} : { heartbeatTimeout: options.heartbeatTimeout }),
    };
    const original = descriptor.value as (...args: unknown[]) => unknown;
    const durable = function (this: unknown, ...args: unknown[]) {
      return runAsStep(stepOptions, () => original.apply(this, args));
    };
    Object.defineProperty(durable, 'name', { value: original.name });
    Reflect.defineMetadata(REDFLOW_STEP, stepOptions, durable);
    descriptor.value = durable;
    return descriptor;
  };
}
