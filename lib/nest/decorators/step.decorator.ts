import { REDFLOW_STEP } from '../redflow.constants';
import { runAsStep } from '../step-context';

/** Options of `@Step`. */
export interface StepDecoratorOptions {
  /** @default the method name */
  name?: string;
  timeoutMs?: number;
}

/**
 * Makes every call of this method inside a running workflow a durable step (`step.run`
 * semantics: stored once, replayed afterwards; repeated calls get `#2`, `#3` suffixes). Called
 * outside a run, the method just runs.
 */
export function Step(nameOrOptions?: string | StepDecoratorOptions): MethodDecorator {
  return (_target, key, descriptor: PropertyDescriptor) => {
    const options = typeof nameOrOptions === 'string' ? { name: nameOrOptions } : (nameOrOptions ?? {});
    const stepOptions = { name: options.name ?? String(key), timeoutMs: options.timeoutMs };
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
