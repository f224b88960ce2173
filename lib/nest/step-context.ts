import { AsyncLocalStorage } from 'node:async_hooks';

import type { RunStepOptions, StepApi, StepRunContext } from '../core';
import { SANDBOX_CALL, type SandboxCall } from '../core/worker/sandbox';

/**
 * The step API of the workflow run the current call belongs to. The store holds a value only
 * inside a workflow handler (outside any step function), so a `@Step` method called anywhere else
 * simply runs. One storage serves every app: each run's store lives in its own async context.
 */
const stepApis = new AsyncLocalStorage<StepApi>();

/** The `signal` and `heartbeat` of the `@Step` method running now, for `currentStep()`. */
const currentStepRun = new AsyncLocalStorage<StepRunContext>();

/**
 * The `signal`, `heartbeat()` and `idempotencyKey` of the `@Step` method running now (what a `step.run` function
 * receives), or `undefined` outside one: a `@Step({ heartbeatTimeout })` method calls
 * `currentStep()?.heartbeat()` as it makes progress.
 */
export function currentStep(): StepRunContext | undefined {
  return currentStepRun.getStore();
}

/** Runs a workflow handler so that `@Step` methods it calls become durable steps. */
export function runWithSteps<T>(step: StepApi, handler: () => T): T {
  return stepApis.run(step, handler);
}

/** Runs `fn` as a durable step when called inside a workflow run, else just runs it. */
export function runAsStep<T>(options: RunStepOptions, fn: () => T | Promise<T>): T | Promise<T> {
  const step = stepApis.getStore();
  if (!step) return fn();
  // Inside the step function there is no enclosing run: nested @Step calls run plainly.
  const run = (context: StepRunContext) => stepApis.exit(() => currentStepRun.run(context, fn));
  // A sandboxed method: the sandbox runs the method itself with its arguments (SANDBOX_CALL).
  const call = (fn as { [SANDBOX_CALL]?: SandboxCall })[SANDBOX_CALL];
  if (call) Object.assign(run, { [SANDBOX_CALL]: call });
  return step.run(options, run);
}
