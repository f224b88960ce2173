/**
 * Lifecycle hooks of a worker: called in process, on the worker that runs the code, as runs and
 * steps start and end there. A hook is not awaited and cannot harm a run: what it throws (or
 * rejects with) is logged and dropped. For events seen by every process, read `client.events()`.
 */

/** A run as its hooks see it. */
export interface RunHookEvent {
  runId: string;
  workflow: string;
  /** The attempt of the run (1 on its first). */
  attempt: number;
}

export interface RunStartEvent extends RunHookEvent {
  maxAttempts: number;
  /** The validated input. */
  input: unknown;
}

export interface RunCompleteEvent extends RunHookEvent {
  output: unknown;
  /** How long this attempt ran, in ms. */
  durationMs: number;
}

export interface RunFailedEvent extends RunHookEvent {
  error: unknown;
  /** True when the run is scheduled for another attempt (then `retryAt` says when). */
  willRetry: boolean;
  retryAt?: number;
  durationMs: number;
}

export interface RunCanceledEvent extends RunHookEvent {
  reason?: string;
}

export interface StepHookEvent extends RunHookEvent {
  /** The step's name, with its `#n` suffix on the n-th call of a repeated name. */
  step: string;
}

export interface StepCompleteEvent extends StepHookEvent {
  output: unknown;
  durationMs: number;
}

export interface StepFailedEvent extends StepHookEvent {
  error: unknown;
  /** True when the step's own retry policy tries it again. */
  willRetry: boolean;
  durationMs: number;
}

/** A run's journal (its step records and other stored values) passed the worker's `journalWarningBytes`. */
export interface JournalLargeEvent extends RunHookEvent {
  /** The journal's size now, in bytes of stored text. */
  bytes: number;
  /** The worker's `journalWarningBytes`. */
  limit: number;
}

/** Where an error reported to `onError` came from. */
export interface WorkerErrorContext {
  workerId: string;
  /** What the worker was doing: "finish", "poll", "cron", "cleanup", "background". */
  task: string;
  runId?: string;
}

/** Worker option `hooks`. */
export interface WorkerHooks {
  /** An attempt of a run starts its handler here. */
  onRunStart?(event: RunStartEvent): unknown;
  /** A run succeeded here (its end is stored). */
  onRunComplete?(event: RunCompleteEvent): unknown;
  /** An attempt failed here: for good, or with another attempt scheduled (`willRetry`). */
  onRunFailed?(event: RunFailedEvent): unknown;
  /** A run running here was canceled. */
  onRunCanceled?(event: RunCanceledEvent): unknown;
  /** A `step.run` function starts (not on replay: a stored step does not run again). */
  onStepStart?(event: StepHookEvent): unknown;
  /** A `step.run` function returned; its record goes out with the next checkpoint. */
  onStepComplete?(event: StepCompleteEvent): unknown;
  /** A `step.run` function threw. */
  onStepFailed?(event: StepFailedEvent): unknown;
  /**
   * A run's journal grew past `journalWarningBytes` (once per run): every attempt reads it whole,
   * and Redis keeps it in memory until the run is deleted. Store less per step, or split the run.
   */
  onJournalLarge?(event: JournalLargeEvent): unknown;
  /** The worker hit an error of its own (Redis, a run it could not finish, a cron that could not fire). */
  onError?(error: unknown, context: WorkerErrorContext): unknown;
}

/** The names of the hooks, as `@OnRunEvent` takes them. */
export const RUN_HOOK_EVENTS = {
  'run.started': 'onRunStart',
  'run.completed': 'onRunComplete',
  'run.failed': 'onRunFailed',
  'run.canceled': 'onRunCanceled',
  'step.started': 'onStepStart',
  'step.completed': 'onStepComplete',
  'step.failed': 'onStepFailed',
  'run.journal-large': 'onJournalLarge',
  'worker.error': 'onError',
} as const satisfies Record<string, keyof WorkerHooks>;

/** An event name of `@OnRunEvent`. */
export type RunHookEventName = keyof typeof RUN_HOOK_EVENTS;

/** Keys of `WorkerHooks`. */
export const WORKER_HOOK_KEYS: readonly (keyof WorkerHooks)[] = Object.values(RUN_HOOK_EVENTS);
