import { ConfigurationError, type Duration, type RunStepOptions, type StepRetryPolicy } from '../../core';
import {
  assertKnownKeys,
  checkHeartbeatTimeout,
  checkStepRetry,
  checkUserName,
  renamedDuration,
  RUN_STEP_OPTION_KEYS,
} from '../../core/definition/option-checks';
import { SANDBOX_CALL, type SandboxCall } from '../../core/worker/sandbox';
import { REDFLOW_STEP } from '../redflow.constants';
import { runAsStep } from '../step-context';
import { methodLabel, type MethodOf } from './workflow.decorator';

/** Options of `@Step`; `C` is the name of its `compensate` method. */
export interface StepDecoratorOptions<C extends string = string> {
  /** @default the method name */
  name?: string;
  /** Aborts the step's signal and fails the try with `TimeoutError` after this long (`'30s'`, or ms). @default no limit */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration such as `'30s'`, or ms); `timeoutMs` goes in the next minor version. */
  timeoutMs?: number;
  /**
   * Retries this step by its own policy before the run-level retry applies (see `step.run`).
   * `{ maxAttempts: 1 }` for no retries.
   * @default the workflow's `stepRetries`, else the module's `defaults.stepRetries`: { maxAttempts: 3 } (1 s, then 2 s)
   */
  retries?: StepRetryPolicy;
  /**
   * Fails a try with `StepHeartbeatTimeoutError` when the method goes this long without calling
   * `currentStep()?.heartbeat()` (see `step.run`); `retries` then apply. @default no heartbeat check
   */
  heartbeatTimeout?: Duration;
  /**
   * The name of a method of the same provider that undoes this step (saga): called with the
   * step's output and a `CompensationContext` when the run fails for good or is canceled with
   * `{ compensate: true }` (see `step.run`'s `compensate`). It runs on the provider, with its
   * injected dependencies.
   */
  compensate?: C;
  /** How the compensation is retried. @default { maxAttempts: 3 } */
  compensateRetries?: StepRetryPolicy;
  /**
   * Runs the method in a thread of a `worker_threads` pool (see `step.run`'s `sandbox`), for
   * CPU-heavy work: it is rebuilt there from its source and called with its arguments (copied by
   * structured clone), without `this` (no injected dependencies) and without the variables of its
   * module; it loads what it needs with `require` (a global in the thread). @default false
   */
  sandbox?: boolean;
}

/**
 * Makes every call of this method inside a running workflow a durable step (`step.run`
 * semantics: stored once, replayed afterwards; repeated calls get `#2`, `#3` suffixes). Called
 * outside a run, the method just runs. Unknown options, a name with `#` or `|`, or an invalid
 * `timeout` or `heartbeatTimeout` throw `ConfigurationError` when the class is decorated.
 */
export function Step<const C extends string = never>(nameOrOptions?: string | StepDecoratorOptions<C>): MethodOf<C> {
  return (target: object, key: string | symbol, descriptor: PropertyDescriptor) => {
    const where = methodLabel(target, key);
    const options = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : (nameOrOptions ?? {});
    assertKnownKeys(`@Step options of ${where}`, options, RUN_STEP_OPTION_KEYS);
    if (options.retries !== undefined) checkStepRetry(options.retries, `@Step retries of ${where}`);
    if (options.heartbeatTimeout !== undefined) checkHeartbeatTimeout(options.heartbeatTimeout, `@Step heartbeatTimeout of ${where}`);
    const name = checkUserName(options.name ?? String(key), `@Step name of ${where}`, {
      forbid: '#|',
      reason: '"#" is reserved for the "#2" suffix of repeated calls and "|" separates stored fields; choose another character',
    });
    const compensate = options.compensate;
    if (compensate !== undefined && (typeof compensate !== 'string' || typeof (target as Record<string, unknown>)[compensate] !== 'function')) {
      throw new ConfigurationError(
        `@Step compensate of ${where} must name a method of the same class, got ${JSON.stringify(compensate)}: add the method (it receives the step's output), or fix the name.`,
      );
    }
    if (options.compensateRetries !== undefined) {
      if (compensate === undefined)
        throw new ConfigurationError(`@Step of ${where} has compensateRetries but no compensate method: add compensate, or drop compensateRetries.`);
      checkStepRetry(options.compensateRetries, `@Step compensateRetries of ${where}`);
    }
    const stepOptions: RunStepOptions = {
      name,
      timeout: renamedDuration(options, { name: 'timeout', deprecated: 'timeoutMs', label: (k) => `@Step ${k} of ${where}`, timer: true }),
      ...(options.retries === undefined ? {} : { retries: options.retries }),
      ...(options.compensateRetries === undefined ? {} : { compensateRetries: options.compensateRetries }),
      ...(options.heartbeatTimeout === undefined ? {} : { heartbeatTimeout: options.heartbeatTimeout }),
      ...(options.sandbox === undefined ? {} : { sandbox: options.sandbox }),
    };
    if (options.sandbox !== undefined && typeof options.sandbox !== 'boolean') {
      throw new ConfigurationError(`@Step sandbox of ${where} must be true or false, got ${typeof options.sandbox}.`);
    }
    if (options.sandbox && options.heartbeatTimeout !== undefined) {
      throw new ConfigurationError(
        `@Step of ${where} has sandbox and heartbeatTimeout: a method in the sandbox cannot call heartbeat(). Give it a timeout instead.`,
      );
    }
    const original = descriptor.value as (...args: unknown[]) => unknown;
    const durable = function (this: unknown, ...args: unknown[]) {
      // The compensation runs on the provider the step ran on: `this`, with its dependencies.
      const options: RunStepOptions =
        compensate === undefined
          ? stepOptions
          : { ...stepOptions, compensate: (output, ctx) => (this as Record<string, (...a: unknown[]) => unknown>)[compensate](output, ctx) };
      const fn = () => original.apply(this, args);
      // In the sandbox the method runs in a thread, with its arguments and without `this`.
      if (stepOptions.sandbox) Object.assign(fn, { [SANDBOX_CALL]: { fn: original, args } satisfies SandboxCall });
      return runAsStep(options, fn);
    };
    Object.defineProperty(durable, 'name', { value: original.name });
    Reflect.defineMetadata(REDFLOW_STEP, stepOptions, durable);
    descriptor.value = durable;
    return descriptor;
  };
}
