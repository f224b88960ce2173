import type { RedflowLogger } from '../definition/logger';
import { assertKnownKeys } from '../definition/option-checks';
import { WORKER_HOOK_KEYS, type RunHookEvent, type WorkerErrorContext, type WorkerHooks } from '../definition/worker-hooks';
import { ConfigurationError } from '../errors';

/** Checks the worker option `hooks`: known names, each a function. */
export function checkHooks(hooks: WorkerHooks | undefined): WorkerHooks {
  if (hooks === undefined) return {};
  if (typeof hooks !== 'object' || hooks === null)
    throw new ConfigurationError('Worker option "hooks" must be an object of functions, like { onRunComplete: (event) => ... }.');
  assertKnownKeys('worker hooks', hooks, WORKER_HOOK_KEYS);
  for (const [name, hook] of Object.entries(hooks)) {
    if (hook !== undefined && typeof hook !== 'function') throw new ConfigurationError(`Worker hook "${name}" must be a function, got ${typeof hook}.`);
  }
  return hooks;
}

/**
 * Calls a worker's hooks: never awaited, and whatever a hook throws or rejects with is logged
 * (once per call) and dropped, so a hook can neither slow down nor fail a run.
 */
export class HookRunner {
  constructor(
    private readonly hooks: WorkerHooks,
    private readonly logger: RedflowLogger,
  ) {}

  /** True when the hook is set: callers skip building its event otherwise. */
  has(name: keyof WorkerHooks): boolean {
    return this.hooks[name] !== undefined;
  }

  emit<K extends Exclude<keyof WorkerHooks, 'onError'>>(name: K, event: Parameters<NonNullable<WorkerHooks[K]>>[0]): void {
    const hook = this.hooks[name] as ((event: unknown) => unknown) | undefined;
    if (!hook) return;
    this.call(name, (event as RunHookEvent).runId, () => hook.call(this.hooks, event));
  }

  /** Reports a worker error to `onError` (the caller logs it). */
  error(error: unknown, context: WorkerErrorContext): void {
    const hook = this.hooks.onError;
    if (hook) this.call('onError', context.runId, () => hook.call(this.hooks, error, context));
  }

  private call(name: string, runId: string | undefined, fn: () => unknown): void {
    const failed = (error: unknown) =>
      this.logger.error(
        `Hook ${name}${runId ? ` (run "${runId}")` : ''} threw: ${(error as Error)?.message ?? String(error)}. The run is not affected.`,
        (error as Error)?.stack,
      );
    try {
      const result = fn();
      if (result && typeof (result as Promise<unknown>).then === 'function') (result as Promise<unknown>).then(undefined, failed);
    } catch (error) {
      failed(error);
    }
  }
}
