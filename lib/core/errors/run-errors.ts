/** Errors about one run: how it ended, a state that refuses an operation, its stored data, a wait for it. */
import { RedflowError } from './redflow-error';

/** The run was canceled. */
export class CanceledError extends RedflowError {
  constructor(
    readonly runId: string,
    readonly reason?: string,
  ) {
    super(`Run "${runId}" was canceled${reason ? `: ${reason}` : ''}.`);
  }
}

/** Data found in Redis could not be read: a run hash without its fields, or undecodable JSON. */
export class CorruptRunDataError extends RedflowError {
  constructor(
    readonly runId: string,
    readonly detail: string,
  ) {
    super(`Run "${runId}" has corrupt data in Redis (${detail}). The run cannot continue; start a new run.`);
  }
}

/**
 * The run's worker died (or stalled) more than `maxRecoveries` times while running it: it failed.
 * Runs fail with its subclass `RunCrashedError` now; runs stored by older versions still read back
 * as this class.
 */
export class RunStalledError extends RedflowError {}

/**
 * The run's attempts kept dying with their worker (a crash, out of memory, a blocked event loop):
 * its lease expired `crashes` times in a row, more than the workers' `maxRecoveries`, so it failed
 * instead of taking more workers down. An attempt that stores a step or ends resets the count.
 * Stored by the reaper's script; `workerId` is the worker that held the last attempt.
 */
export class RunCrashedError extends RunStalledError {
  constructor(
    readonly runId: string,
    /** Leases that expired in a row, the last one included. */
    readonly crashes: number,
    /** The id of the worker that held the last attempt (from its lease token). */
    readonly workerId: string,
  ) {
    super(
      `Run "${runId}" crashed its worker ${crashes} times in a row (last on worker "${workerId}"): each attempt died or stopped renewing its lease (a crash, out of memory, or a blocked event loop in this run?). It was failed so it stops taking workers down; fix the cause, then resume or re-run it.`,
    );
  }
}

/** The run was terminated by an operator (`terminate`): it ended at once, without cleanup. */
export class RunTerminatedError extends RedflowError {
  constructor(
    readonly runId: string,
    readonly reason?: string,
  ) {
    super(`Run "${runId}" was terminated${reason ? `: ${reason}` : ''}.`);
  }
}

/** `deleteRun` of a run that has not ended, without `{ force: true }`: nothing was deleted. */
export class RunNotEndedError extends RedflowError {
  constructor(
    readonly runId: string,
    /** The run's status when it was refused. */
    readonly status: string,
  ) {
    super(
      `Run "${runId}" is ${status}: only an ended run can be deleted. End it first (cancelRun or terminate), or pass { force: true } to terminate and delete it in one step.`,
    );
  }
}

/** No run has this id under the client's prefix. */
export class RunNotFoundError extends RedflowError {
  constructor(readonly runId: string) {
    super(`Run "${runId}" does not exist: the id is wrong, it belongs to another prefix, or retention deleted the run.`);
  }
}

/** `resume` of a run that is not failed, canceled or terminated: a live run goes on by itself, a succeeded one is done. */
export class RunNotResumableError extends RedflowError {
  constructor(
    readonly runId: string,
    /** The run's status when it was refused. */
    readonly status: string,
  ) {
    const fix =
      status === 'succeeded'
        ? 'Use rerun() to run its workflow again as a new run.'
        : status === 'compensating'
          ? 'Its compensations are running: wait for it to end.'
          : 'Wait for it to end, or cancel it first (cancelRun) and then resume it.';
    super(`Run "${runId}" is ${status}: only a failed, canceled, compensation_failed or terminated run can be resumed. ${fix}`);
  }
}

/**
 * A replay reached steps in an order the run's journal contradicts: the code changed under a
 * run in flight (a completed step renamed or removed, a step inserted before a completed one).
 * No function of the new step ran. Permanent: the run fails, unless its workflow's
 * `onNonDeterminism` is `'retry-latest'`.
 */
export class NonDeterminismError extends RedflowError {
  constructor(
    readonly runId: string,
    /** 1-based position, in the journal's order, of the step the code did not reach. */
    readonly position: number,
    /** The step name the journal holds at `position`. */
    readonly expected: string,
    /** The step the code reached instead, or `(end of the workflow)` when it returned without it. */
    readonly found: string,
  ) {
    super(
      `Run "${runId}" is not deterministic: step ${position} of its journal is "${expected}", but the code reached "${found}" instead. The workflow changed under a run in flight: restore the step, guard the change with step.patched(), or deploy it as a new version (option version).`,
    );
  }
}

/** A run has as many buffered signals as it may hold: the signal was not stored. */
export class SignalBufferFullError extends RedflowError {
  constructor(
    readonly runId: string,
    readonly signal: string,
    readonly limit: number,
  ) {
    super(
      `Run "${runId}" already holds ${limit} signals that no step.waitForSignal has consumed, so signal "${signal}" was refused. Make the workflow wait for its signals, or send fewer.`,
    );
  }
}

/** The idempotency key is already used by a run with a different input. */
export class IdempotencyConflictError extends RedflowError {
  constructor(
    readonly workflow: string,
    readonly idempotencyKey: string,
    readonly existingRunId: string,
  ) {
    super(
      `Idempotency key "${idempotencyKey}" of workflow "${workflow}" is already used by run "${existingRunId}" with a different input. Use a new key for a different input.`,
    );
  }
}

/** The run started more often than its workflow's `rateLimit` allows; it failed before its handler. */
export class RateLimitExceededError extends RedflowError {}

/** The error a run failed with, rebuilt from its stored form when its class is not one of ours. */
export class WorkflowRunError extends RedflowError {
  constructor(
    message: string,
    /** The `name` of the error as it was thrown, e.g. `TypeError`. */
    readonly originalName: string,
  ) {
    super(message);
  }
}

/** The client was closed while a call of it was still waiting (`result()`, `waitForRun`). */
export class ClientClosedError extends RedflowError {
  constructor(readonly what: string) {
    super(`${what} stopped: its client was closed. Close the client only after the waits you need are over, or wait with a client that stays open.`);
  }
}
