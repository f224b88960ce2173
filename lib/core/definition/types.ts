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
export const RUN_STATUSES: readonly RunStatus[] = ['scheduled', 'queued', 'running', 'compensating', 'succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated'];

/** Statuses a run never leaves (a `compensation_failed` or `terminated` run leaves it only when resumed). */
export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(['succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated']);

/**
 * An error as stored with a run or step. `fields` holds the own data fields of the library's error
 * classes (`TimeoutError.timeoutMs`, `CanceledError.runId`, ...); `issues` the validation issues of
 * an `InputValidationError`.
 */
export interface StoredError {
  name: string;
  message: string;
  stack?: string;
  issues?: unknown;
  fields?: Record<string, unknown>;
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
  /** The error of the last failed attempt, or of the run when it failed or was canceled. */
  error?: StoredError;
  attempt: number;
  maxAttempts: number;
  createdAt: number;
  /** When the run is or was due to start (after a delay or retry backoff). */
  availableAt: number;
  /** When the current or last attempt started. */
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
export interface IntactRunSummary
  extends Pick<RunState, 'id' | 'workflow' | 'queue' | 'version' | 'status' | 'attempt' | 'maxAttempts' | 'createdAt' | 'availableAt' | 'startedAt' | 'finishedAt' | 'parentId'> {
  /** `finishedAt - startedAt`: the length of the last attempt of an ended run that started. */
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

/** A stored step record. */
export interface StepState {
  name: string;
  /** `waiting`: a `waitFor` not yet due, a child run not yet ended, or a signal not yet received. */
  status: 'succeeded' | 'failed' | 'waiting';
  output?: unknown;
  error?: StoredError;
  /** Order in which the run's step records were stored. */
  seq: number;
  /** The attempt that ran it. */
  attempt: number;
  startedAt?: number;
  finishedAt?: number;
  /** For `waitFor` steps. */
  wakeAt?: number;
  /** For `runWorkflow` steps still waiting. */
  childRunId?: string;
  /** For `waitForSignal` steps still waiting: the signal name (`wakeAt` is the timeout, if any). */
  signal?: string;
  /** For `waitForEvent` steps still waiting: the event name and the match (`wakeAt` is the timeout, if any). */
  event?: string;
  match?: Record<string, unknown>;
  /** Times its function ran: failed tries plus the one that succeeded. Set once it ran at all. */
  attempts?: number;
  /** The error of its last failed try, when one failed (also when a later try succeeded). */
  lastError?: StoredError;
  /** When the next try of a step retried by its own policy is due. */
  retryAt?: number;
}

/**
 * The depth of one queue, as `getQueueStats` reads it: a few counting commands per queue, never a
 * scan of its runs.
 */
export interface QueueStats {
  queue: string;
  /**
   * Runs waiting to be claimed: the length of the queue's ready list. A run canceled while queued
   * counts until the next claim drops its id; a run waiting for a concurrency slot or a mutex is
   * not in the list until one is free.
   */
  queued: number;
  /** Runs of the queue due later: delayed, backing off before another attempt, sleeping, or waiting with a timeout. */
  scheduled: number;
  /**
   * Runs running now of the workflows registered on this queue (Redis indexes running runs by
   * workflow, so a run started with `queueOverride` counts on its workflow's own queue).
   */
  running: number;
  /**
   * When the run at the head of the ready list became claimable (its `availableAt`, ms, in client
   * time), or null when the queue has no queued run among the first ids of its list.
   */
  oldestQueuedAt: number | null;
}

/** Options of `getQueueStats`. */
export interface QueueStatsOptions {
  /**
   * The queues to read. By default the queues of the workflows registered in Redis; queues named
   * here are read even when no workflow is registered on them.
   */
  queues?: readonly string[];
}

/** Registry entry of a workflow, as synced by workers. */
export interface WorkflowMeta {
  name: string;
  queue: string;
  maxAttempts: number;
  /** `Infinity` when unlimited. */
  maxConcurrency: number;
  /** Events it is subscribed to. */
  events: string[];
  /** Ids of its cron schedules. */
  crons: string[];
  owner: string;
  updatedAt: number;
  /** The latest registered version: what runs started by name (events, crons, `runByName`) get. */
  version: number;
  /** Every version workers registered, oldest first, with the workers that serve it now. */
  versions: WorkflowVersionState[];
}

/** A registered version of a workflow (`WorkflowMeta.versions`). */
export interface WorkflowVersionState {
  version: number;
  /** Ids of the live workers that registered this version. */
  workers: string[];
  /** When a worker last said it serves this version (ms). */
  updatedAt: number;
  /**
   * Set when no live worker has this version while runs started on it are not over, e.g.
   * `no worker for checkout v1`: those runs stay queued until a worker with that version starts.
   */
  noWorker?: string;
}

/** The logger the engine writes through; the Nest layer passes Nest's Logger. */
export interface RedflowLogger {
  log(message: string): void;
  warn(message: string): void;
  error(message: string, stack?: string): void;
}

/** Writes warnings and errors to stderr, nothing else. */
export const stderrLogger: RedflowLogger = {
  log() {},
  warn(message) {
    process.stderr.write(`[redflow] ${message}\n`);
  },
  error(message, stack) {
    process.stderr.write(`[redflow] ${message}${stack ? `\n${stack}` : ''}\n`);
  },
};

/** Counts for a dashboard overview. */
export interface RunStats {
  byStatus: Record<RunStatus, number>;
  byWorkflow: Record<string, number>;
  /** Runs that ended in each minute, oldest first. */
  perMinute: Array<{ minute: number; succeeded: number; failed: number }>;
}

/** A cron schedule as registered in Redis: a trigger of a workflow definition, or a runtime schedule. */
export interface CronState {
  /** The trigger's id (`cron[].id`, `@Cron({ id })`, or `<workflow>#<index>`), or the id given to `client.schedule`. */
  id: string;
  /** `definition`: a `cron` trigger of a workflow (or `@Cron`), synced by workers; `runtime`: added by `client.schedule`. */
  source: 'definition' | 'runtime';
  workflow: string;
  /** The cron expression; absent for an `every` schedule. */
  expression?: string;
  /** The interval in ms of an `every` schedule. */
  every?: number;
  timezone?: string;
  input: unknown;
  /** Epoch ms of the next tick. */
  nextAt?: number;
}

/** Options of `client.schedule`: the workflow, and exactly one of `cron` and `every`. */
export interface ScheduleOptions {
  /** The workflow each tick starts a run of. */
  workflow: string;
  /** A croner expression (a leading seconds field is allowed), e.g. `"0 9 * * 1-5"`. */
  cron?: string;
  /** An interval of at least 1 s: ms, or a string such as `"30s"`. Ticks fall on its multiples since the epoch. */
  every?: Duration;
  /** The input of every run it starts, validated like `runByName`'s. @default null */
  input?: unknown;
  /** IANA time zone of `cron`. @default the workers' */
  timezone?: string;
}

/** A runtime schedule as stored in Redis (`client.listSchedules`). */
export interface ScheduleState {
  id: string;
  workflow: string;
  /** The cron expression; absent for an `every` schedule. */
  cron?: string;
  /** The interval in ms; absent for a cron schedule. */
  every?: number;
  timezone?: string;
  input: unknown;
  /** Epoch ms of the next tick. */
  nextAt?: number;
}

/** Options of starting a run. */
export interface RunOptions {
  /** Returns the existing run for the same key (and input) instead of starting another one. */
  idempotencyKey?: string;
  /** Seconds the idempotency key is kept. @default 604800 (7 days) */
  idempotencyTtl?: number;
  /** Start no earlier than this (a Date or epoch ms); the run waits as `scheduled` until then. */
  runAt?: Date | number;
  /** Run on this queue instead of the workflow's own. */
  queueOverride?: string;
  /** This run's timeout, instead of the workflow's `timeout` (see `WorkflowOptions.timeout`). */
  timeout?: Duration;
  /**
   * Start the run on this version of the workflow (a worker with that version claims it).
   * @default the version of the definition given to `start`; by name, the latest registered version
   */
  version?: number;
}

/** Options of `emitEvent`. */
export interface EmitEventOptions {
  /** A repeated emit with the same key (within the TTL) returns the same runs. */
  idempotencyKey?: string;
  /** Seconds the key is kept. @default 604800 (7 days) */
  idempotencyTtl?: number;
  /** Fan out at this time instead of now. */
  emitAt?: Date | number;
}

/** Filters of `listRuns` and `listRunSummaries`; results are newest first. */
export interface ListRunsOptions {
  workflow?: string;
  status?: RunStatus;
  /** Only runs that started on this version of `workflow` (needs `workflow`). */
  version?: number;
  /** @default 50 */
  limit?: number;
  /** @default 0 */
  offset?: number;
}

/** Filters of `countRuns`: both, either or neither. */
export interface CountRunsOptions {
  workflow?: string;
  status?: RunStatus;
  /**
   * Only runs that started on this version of `workflow` (needs `workflow`). Unlike the other
   * filters this reads each run of the index (its `queue` field), in pipelines of 1,000.
   */
  version?: number;
}

/**
 * A status a run ends in, as retention and `prune` delete them. A `compensation_failed` run is
 * never deleted by either: it waits for a person (resume it, or delete it).
 */
export type EndedStatus = 'succeeded' | 'failed' | 'canceled' | 'terminated';

/** Every status a run ends in, `compensation_failed` included. */
export type FinalStatus = EndedStatus | 'compensation_failed';

/** The statuses a run ends in, in the order the scripts that delete ended runs take their indexes. */
export const ENDED_STATUSES: readonly EndedStatus[] = ['succeeded', 'failed', 'canceled', 'terminated'];

/** Options of `prune`. */
export interface PruneOptions {
  /** Deletes runs that finished longer ago than this: ms, or a string such as `"7d"`. */
  olderThan: Duration;
  /** @default ['succeeded', 'failed', 'canceled', 'terminated'] */
  statuses?: EndedStatus[];
  /** Only this workflow's runs. @default every workflow */
  workflow?: string;
}

/** A started run. */
/** Options of `client.waitForRun`. */
export interface WaitForRunOptions {
  /** Reject with TimeoutError after this long (ms). @default no limit */
  timeoutMs?: number;
  /** Stop waiting when it aborts: the wait rejects with the signal's reason. */
  signal?: AbortSignal;
  /** `false`: resolve with the final state (`RunOutcome`) even when the run failed or was canceled. @default true */
  throwOnFailure?: boolean;
}

/** How a run ended, as `waitForRun(id, { throwOnFailure: false })` resolves. */
export type RunOutcome<TOutput = unknown> =
  | { runId: string; status: 'succeeded'; output: TOutput }
  | { runId: string; status: 'failed'; error: Error }
  | { runId: string; status: 'canceled'; error: Error; reason?: string }
  | { runId: string; status: 'terminated'; error: Error }
  /** A compensation failed after its retries (saga): `error` is the run's own error; `getRun` has the compensation's. */
  | { runId: string; status: 'compensation_failed'; error: Error };

export interface RunHandle<TOutput = unknown> {
  readonly id: string;
  /** The run as stored now, or null if it no longer exists. */
  getState(): Promise<RunState<TOutput> | null>;
  /**
   * Waits for the run to end, woken by its end (no polling). Resolves with its output; rejects
   * with its error when it failed, `CanceledError` when canceled, `TimeoutError` after
   * `timeoutMs`, and the signal's reason when `signal` aborts.
   */
  result(options?: { timeoutMs?: number; signal?: AbortSignal }): Promise<TOutput>;
}
