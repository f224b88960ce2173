/** Options of the client's calls on runs: starting, emitting events, listing, counting, waiting, pruning. */
import type { Duration } from './duration-format';
import type { EndedStatus, RunStatus, WaitKind } from './run-types';

/** Options of starting a run. */
export interface RunOptions {
  /** Returns the existing run for the same key (and input) instead of starting another one. */
  idempotencyKey?: string;
  /** How long the idempotency key is kept: a start with the same key within it returns the same run. @default '7d' */
  idempotencyWindow?: Duration;
  /** @deprecated Use `idempotencyWindow` (a duration such as `'1d'`); `idempotencyTtl`, in seconds, goes in the next minor version. */
  idempotencyTtl?: number;
  /** Start no earlier than this (a Date or epoch ms); the run waits as `scheduled` until then. */
  runAt?: Date | number;
  /** Run on this queue instead of the workflow's own. */
  queueOverride?: string;
  /**
   * Claimed before runs of lower priority in its queue (FIFO within a priority): an integer from
   * -1000 to 1000, higher first. Each level counts as one minute of waiting, so no run waits
   * forever: a run is passed only by runs of priority p + n that became ready less than n minutes
   * after it. @default the workflow's `priority`, else 0
   */
  priority?: number;
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
  /** A repeated emit with the same key (within `idempotencyWindow`) returns the same runs. */
  idempotencyKey?: string;
  /** How long the key is kept. @default '7d' */
  idempotencyWindow?: Duration;
  /** @deprecated Use `idempotencyWindow` (a duration such as `'1d'`); `idempotencyTtl`, in seconds, goes in the next minor version. */
  idempotencyTtl?: number;
  /** Fan out at this time instead of now. */
  emitAt?: Date | number;
}

/**
 * A filter of runs suspended in a step, by what they wait for (`RunState.waitingFor`): a kind, or
 * `signal:<name>` / `event:<name>` for one signal or event name. Such runs are `scheduled`.
 */
export type WaitingFilter = WaitKind | `signal:${string}` | `event:${string}`;

/** Filters of `listRuns` and `listRunSummaries`; results are newest first. */
export interface ListRunsOptions {
  workflow?: string;
  status?: RunStatus;
  /** Only runs that started on this version of `workflow` (needs `workflow`). */
  version?: number;
  /**
   * Only runs suspended waiting for this (`'signal'`, `'signal:approve'`, `'event:order.paid'`,
   * `'child'`, `'sleep'`, `'any'`): read from an index of waiting runs, O(page). With `workflow`,
   * the index is read in pipelines of 1,000 until the page is full. Its status is `scheduled`;
   * another `status` is an error.
   */
  waiting?: WaitingFilter;
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
  /** Only runs suspended waiting for this, as in `ListRunsOptions.waiting`: one `ZCARD` without `workflow`. */
  waiting?: WaitingFilter;
}

/** Options of `prune`. */
export interface PruneOptions {
  /** Deletes runs that finished longer ago than this: ms, or a string such as `"7d"`. */
  olderThan: Duration;
  /** @default ['succeeded', 'failed', 'canceled', 'terminated'] */
  statuses?: EndedStatus[];
  /** Only this workflow's runs. @default every workflow */
  workflow?: string;
}

/** Options of `client.getRunEvent`. */
export interface GetRunEventOptions {
  /** How long to wait for the value to exist. @default '60s' */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration: `'30s'` or ms); `timeoutMs` goes in the next minor version. */
  timeoutMs?: number;
}

/** Options of `client.waitForRun`. */
export interface WaitForRunOptions {
  /** Reject with TimeoutError after this long. @default no limit */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration: `'30s'` or ms); `timeoutMs` goes in the next minor version. */
  timeoutMs?: number;
  /** Stop waiting when it aborts: the wait rejects with the signal's reason. */
  signal?: AbortSignal;
  /** `false`: resolve with the final state (`RunOutcome`) even when the run failed or was canceled. @default true */
  throwOnFailure?: boolean;
}
