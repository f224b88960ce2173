/**
 * A run and its steps as the client reads them: statuses, the stored run and step records, list
 * rows, the error record, and the handle of a started run.
 */

import type { Duration } from './duration-format';

/**
 * Where a run is in its life. `compensating`: it failed for good or was canceled with
 * `{ compensate: true }`, and the compensations of its completed steps are running (it then ends
 * `failed` or `canceled` with `compensated: true`). `compensation_failed`: a compensation failed
 * after its retries: the run needs a person (`resume` runs the compensations left). `terminated`:
 * ended at once by `terminate`, without compensations.
 */
export type RunStatus = 'scheduled' | 'queued' | 'running' | 'compensating' | 'succeeded' | 'failed' | 'canceled' | 'compensation_failed' | 'terminated';

/** Every status. */
export const RUN_STATUSES: readonly RunStatus[] = [
  'scheduled',
  'queued',
  'running',
  'compensating',
  'succeeded',
  'failed',
  'canceled',
  'compensation_failed',
  'terminated',
];

/** Statuses a run never leaves (a `compensation_failed` or `terminated` run leaves it only when resumed). */
export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(['succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated']);

/**
 * A status a run ends in, as retention and `prune` delete them. A `compensation_failed` run is
 * never deleted by either: it waits for a person (resume it, or delete it).
 */
export type EndedStatus = 'succeeded' | 'failed' | 'canceled' | 'terminated';

/** Every status a run ends in, `compensation_failed` included. */
export type FinalStatus = EndedStatus | 'compensation_failed';

/** The statuses a run ends in, in the order the scripts that delete ended runs take their indexes. */
export const ENDED_STATUSES: readonly EndedStatus[] = ['succeeded', 'failed', 'canceled', 'terminated'];

/**
 * An error as stored with a run or step. `fields` holds the own data fields of the library's error
 * classes (`TimeoutError.timeoutMs`, `CanceledError.runId`, ...; errors stored before the error
 * table have none); `issues` the validation issues of an `InputValidationError`.
 */
export interface StoredError {
  name: string;
  message: string;
  stack?: string;
  issues?: unknown;
  fields?: Record<string, unknown>;
}

/** What a suspended run waits for: a `waitFor` (sleep), a signal, an event, a child run, or a `waitForAny` race (any). */
export type WaitKind = 'sleep' | 'signal' | 'event' | 'child' | 'any';

/** Every wait kind. */
export const WAIT_KINDS: readonly WaitKind[] = ['sleep', 'signal', 'event', 'child', 'any'];

/** What a `scheduled` run suspended in a step waits for now (`RunState.waitingFor`, `RunSummary.waitingFor`). */
export interface WaitingFor {
  kind: WaitKind;
  /** The signal's or the event's name, or the child run's id (kinds signal, event, child). */
  name?: string;
  /** When the run is due to wake (epoch ms, workflow clock): the sleep's end or the wait's timeout, when it has one. */
  until?: number;
}

/** A run as stored. */
export interface RunState<TOutput = unknown> {
  id: string;
  workflow: string;
  queue: string;
  /** The version of the workflow the run started on (and runs on): only a worker with that version claims it. */
  version: number;
  status: RunStatus;
  input: unknown;
  output?: TOutput;
  /**
   * The run's error when it failed, was canceled or terminated (or is compensating); while a retry
   * is pending, the error of the attempt that failed. Never set on a succeeded run, even when an
   * earlier attempt failed.
   */
  error?: StoredError;
  attempt: number;
  maxAttempts: number;
  createdAt: number;
  /** When the run is or was due to start (after a delay or retry backoff). */
  availableAt: number;
  /** When the run first started: its first attempt's start, kept through retries, waits and recoveries. */
  startedAt?: number;
  finishedAt?: number;
  cancelReason?: string;
  idempotencyKey?: string;
  /** The run that started this one with `step.runWorkflow` / `step.emitWorkflow`. */
  parentId?: string;
  /** The latest value given to `step.setProgress`, if any. */
  progress?: unknown;
  /** True when the run failed or was canceled and every compensation of its completed steps ran. */
  compensated?: boolean;
  /** The error of the compensation that failed (status `compensation_failed`); `error` keeps the run's own. */
  compensationError?: StoredError;
  /** The run's timeout in ms (its own or its workflow's), if it has one. */
  timeoutMs?: number;
  /** When the run's timeout passes (epoch ms, from its first start); set once it started. */
  deadline?: number;
  /**
   * What the run waits for, only while it is `scheduled` because a step suspended it (a sleep, a
   * signal, an event, a child run, a race); a delayed run or one backing off before a retry has none.
   */
  waitingFor?: WaitingFor;
}

/** The error of a run in a list: its class name and the start of its message. */
export interface RunErrorSummary {
  name: string;
  /** Cut to 200 characters, ending with '…' when it was longer. */
  message: string;
}

/**
 * A run as a list row shows it: read without its input, output or step records, so a page of
 * summaries stays small whatever the runs carry.
 */
export interface IntactRunSummary extends Pick<
  RunState,
  | 'id'
  | 'workflow'
  | 'queue'
  | 'version'
  | 'status'
  | 'attempt'
  | 'maxAttempts'
  | 'createdAt'
  | 'availableAt'
  | 'startedAt'
  | 'finishedAt'
  | 'parentId'
  | 'waitingFor'
> {
  /** `finishedAt - startedAt`: how long an ended run took from its first start, waits and retries included. */
  durationMs?: number;
  error?: RunErrorSummary;
  /** Never set here; lets `summary.corrupt !== undefined` tell a `CorruptRunSummary` apart. */
  corrupt?: undefined;
}

/**
 * A run whose stored hash could not be read (a field missing or undecodable): `corrupt` says
 * what is wrong, and only the fields that could be read are set.
 */
export type CorruptRunSummary = Partial<Omit<IntactRunSummary, 'id' | 'corrupt'>> & {
  id: string;
  /** What could not be read, e.g. `field "error" is not valid JSON`. */
  corrupt: string;
};

/** A row of `listRunSummaries`: check `corrupt !== undefined` before relying on the other fields. */
export type RunSummary = IntactRunSummary | CorruptRunSummary;

/** One attempt of a run, from `getRunAttempts`: how it ended, and its error when it failed. */
export interface AttemptState {
  attempt: number;
  /**
   * `retry`: it failed and another attempt followed; `failed`: it failed the run for good (then the
   * run may have compensated); `succeeded`; or, for a run's last attempt, how the run ended
   * (`canceled`, `terminated`, `compensation_failed`).
   */
  outcome: 'retry' | 'failed' | 'succeeded' | 'canceled' | 'terminated' | 'compensation_failed';
  /** When it ended (workflow time, ms). */
  finishedAt: number;
  /** Its error, when it failed or the run was canceled or terminated. */
  error?: StoredError;
}

/** A stored step record. */
export interface StepState {
  name: string;
  /**
   * `waiting`: a `waitFor` not yet due, a child run not yet ended, or a signal or event not yet
   * received. `interrupted`: the run ended (canceled, terminated, failed, timed out) while the step
   * waited, so it never completed; it has no pending wait (only `childRunId` stays, for a child step).
   */
  status: 'succeeded' | 'failed' | 'waiting' | 'interrupted';
  output?: unknown;
  error?: StoredError;
  /** Order in which the run's step records were stored. */
  seq: number;
  /** The attempt that ran it. */
  attempt: number;
  /**
   * When it started: a `step.run` its last try's start, a wait (sleep, signal, event, child run,
   * race) when the wait began. `finishedAt`: when it ended (a sleep: its wake time).
   */
  startedAt?: number;
  finishedAt?: number;
  /** For `waitFor` steps. */
  wakeAt?: number;
  /** For `runWorkflow` steps: the child run it waits (or waited) for. */
  childRunId?: string;
  /**
   * For `waitForSignal` steps: the signal name it waits (or waited) for; while it waits, `wakeAt`
   * is the timeout, if any. `status` tells whether it still waits.
   */
  signal?: string;
  /** For `waitForEvent` steps: the event name it waits (or waited) for, and the match while it waits (`wakeAt` is the timeout, if any). */
  event?: string;
  match?: Record<string, unknown>;
  /** Times its function ran: failed tries plus the one that succeeded. Set once it ran at all. */
  attempts?: number;
  /** The error of its last failed try, when one failed (also when a later try succeeded). */
  lastError?: StoredError;
  /** When the next try of a step retried by its own policy is due. */
  retryAt?: number;
  /**
   * Each try of a step whose function threw at least once (the try that then succeeded included),
   * oldest first: the last 20 only. `attempt` is the run attempt it ran in; `error` the name and
   * message of a failed try. Steps that never failed have none.
   */
  tries?: Array<{ startedAt: number; finishedAt: number; attempt: number; error?: { name: string; message: string } }>;
}

/** How a run ended, as `waitForRun(id, { throwOnFailure: false })` resolves. */
export type RunOutcome<TOutput = unknown> =
  | { runId: string; status: 'succeeded'; output: TOutput }
  | { runId: string; status: 'failed'; error: Error }
  | { runId: string; status: 'canceled'; error: Error; reason?: string }
  | { runId: string; status: 'terminated'; error: Error }
  /** A compensation failed after its retries (saga): `error` is the run's own error; `getRun` has the compensation's. */
  | { runId: string; status: 'compensation_failed'; error: Error };

/** Options of `handle.result()`. */
export interface ResultOptions {
  /** Reject with TimeoutError after this long. @default no limit */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration: `'30s'` or ms); `timeoutMs` goes in the next minor version. */
  timeoutMs?: number;
  /** Stop waiting when it aborts: the wait rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** A started run. */
export interface RunHandle<TOutput = unknown> {
  readonly id: string;
  /** The run as stored now, or null if it no longer exists. */
  getState(): Promise<RunState<TOutput> | null>;
  /**
   * Waits for the run to end, woken by its end (no polling). Resolves with its output; rejects
   * with its error when it failed, `CanceledError` when canceled, `TimeoutError` after
   * `timeout`, and the signal's reason when `signal` aborts.
   */
  result(options?: ResultOptions): Promise<TOutput>;
}
