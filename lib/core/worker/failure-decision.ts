import { nextAttemptAt } from '../definition/retry';
import type { RetryPolicy, RunInfo } from '../definition/workflow-types';
import { CanceledError, NonDeterminismError, RunTerminatedError, RunTimeoutError } from '../errors';
import { SiblingStepFailedError, SuspendSignal } from './step-runtime';

/**
 * What ends an attempt whose handler threw, decided without I/O: the executor gathers the facts,
 * asks here, and carries the answer out (one finish call, hooks, compensations). Unit-tested in
 * test/unit/failure-decision.spec.ts.
 */

/** Why the attempt was stopped before its handler returned, if it was. */
export type StopReason = CanceledError | RunTerminatedError | RunTimeoutError | undefined;

/** How the handler's rejection is read: a wait (the attempt suspends), or the error it failed with. */
export type ThrownOutcome = { action: 'suspend' } | { action: 'failed'; error: unknown };

/**
 * The handler rejected with `thrown`. A run that waits (a step suspended it) suspends, unless it
 * was stopped or a step failed for good meanwhile. Else the error is the run timeout when the run
 * timed out (whatever the aborted handler threw), the step failure that stopped its siblings
 * (Promise.all rejects with the first branch to settle), or what was thrown.
 */
export function readThrown(thrown: unknown, facts: { suspended: boolean; stepFailure: unknown; stopReason: StopReason }): ThrownOutcome {
  const { suspended, stepFailure, stopReason } = facts;
  if (suspended && !stopReason && stepFailure === undefined) return { action: 'suspend' };
  if (stopReason instanceof RunTimeoutError) return { action: 'failed', error: stopReason };
  if ((thrown instanceof SiblingStepFailedError || thrown instanceof SuspendSignal) && stepFailure !== undefined)
    return { action: 'failed', error: stepFailure };
  return { action: 'failed', error: thrown };
}

/** What is known when an attempt failed. */
export interface FailureFacts {
  error: unknown;
  run: RunInfo;
  /** Workflow time now (ms). */
  now: number;
  /** When the run's timeout passes (workflow time); 0 = no timeout. */
  deadline: number;
  /** The run was claimed `compensating`: it failed already, and this attempt ran its compensations. */
  compensating: boolean;
  /** What a compensating run ends as once compensated (from its `compensate` field). */
  compensationTarget: 'failed' | 'canceled';
  /** This worker must leave the run (canceled, terminated, lost). */
  halted: boolean;
  /** The attempt was stopped (canceled, terminated, timed out, lost). */
  stopReason: StopReason;
  /** The workflow as registered in this worker; undefined when it is not. */
  workflow: { retries?: RetryPolicy; onNonDeterminism?: 'fail' | 'retry-latest'; hasOnFailure: boolean } | undefined;
  /** True once moving the run to the latest version was tried and found none newer. */
  latestTried?: boolean;
  /** Whether the run's journal has compensations due; asked only for a final failure. */
  compensationsDue(): boolean;
}

/** What the executor does with a failed attempt. */
export type FailureDecision =
  /** Nothing: the run is another worker's or a person's now. */
  | { action: 'leave' }
  /** A compensating run that failed here (it could not be replayed): it ends `compensation_failed`. */
  | { action: 'end-compensation'; target: 'failed' | 'canceled'; error: unknown }
  /** `onNonDeterminism: 'retry-latest'`: try the run again on the latest version, if there is a newer one. */
  | { action: 'move-to-latest'; error: NonDeterminismError }
  /** Another attempt at `dueAt` (workflow time). */
  | { action: 'retry'; error: unknown; dueAt: number }
  /** Failed for good with compensations due: the run becomes `compensating` and they run now. */
  | { action: 'compensate'; error: unknown }
  /** Failed for good; `onFailure` says whether the workflow's onFailure hook runs. */
  | { action: 'fail'; error: unknown; onFailure: boolean };

/**
 * Retry when, compensate or fail, with which error:
 * - a compensating run ends `compensation_failed` (unless this worker must leave it);
 * - a non-determinism error with `retry-latest` moves to the latest version first;
 * - the workflow's retry policy (attempts left, the error retryable, `shouldRetry`, the delay)
 *   gives the next attempt's due time, never after the run's deadline; a policy that throws fails
 *   the run with what it threw;
 * - a final failure compensates when the journal has compensations due and the run is not halted.
 */
export function decideFailure(facts: FailureFacts): FailureDecision {
  const { run, workflow } = facts;
  let error = facts.error;
  if (facts.compensating) return facts.halted ? { action: 'leave' } : { action: 'end-compensation', target: facts.compensationTarget, error };
  if (error instanceof NonDeterminismError && !facts.stopReason && !facts.latestTried && workflow?.onNonDeterminism === 'retry-latest') {
    return { action: 'move-to-latest', error };
  }
  let dueAt: number | null;
  try {
    dueAt = nextAttemptAt(workflow?.retries, run, error, facts.now);
  } catch (policyError) {
    dueAt = null;
    error = policyError;
  }
  if (dueAt !== null) return { action: 'retry', error, dueAt: notAfterDeadline(dueAt, facts.deadline) };
  if (!facts.halted && workflow && facts.compensationsDue()) return { action: 'compensate', error };
  return { action: 'fail', error, onFailure: Boolean(workflow?.hasOnFailure) };
}

/** A due time (0 = none) no later than the run's deadline, so that a waiting run wakes to fail on time. */
export function notAfterDeadline(dueAt: number, deadline: number): number {
  if (!deadline) return dueAt;
  return dueAt === 0 ? deadline : Math.min(dueAt, deadline);
}
