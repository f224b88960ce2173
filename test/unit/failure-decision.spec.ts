import { CanceledError, NonDeterminismError, NonRetriableError, RetryAfterError, RunTimeoutError } from '../../lib/core/errors';
import { decideFailure, notAfterDeadline, readThrown, type FailureFacts } from '../../lib/core/worker/failure-decision';
import { SiblingStepFailedError, SuspendSignal } from '../../lib/core/worker/step-runtime';

/**
 * What ends a failed attempt (retry when, compensate or fail, with which error), decided without
 * Redis: the executor carries the answer out. NOW is workflow time.
 */
const NOW = 1_000_000;

function facts(overrides: Partial<FailureFacts> = {}): FailureFacts {
  return {
    error: new Error('boom'),
    run: { id: 'run-1', workflow: 'pay', queue: 'default', attempt: 1, maxAttempts: 3 },
    now: NOW,
    deadline: 0,
    compensating: false,
    compensationTarget: 'failed',
    halted: false,
    stopReason: undefined,
    workflow: { retries: { maxAttempts: 3, delay: 500 }, hasOnFailure: false },
    compensationsDue: () => false,
    ...overrides,
  };
}

describe('readThrown: how a rejected handler is read', () => {
  const boom = new Error('boom');
  const stepFailure = new Error('card declined');

  it('a waiting attempt suspends', () => {
    expect(readThrown(new SuspendSignal('waits'), { suspended: true, stepFailure: undefined, stopReason: undefined })).toEqual({ action: 'suspend' });
  });

  it('a waiting attempt whose sibling step failed for good fails with that step failure', () => {
    expect(readThrown(new SuspendSignal('waits'), { suspended: true, stepFailure, stopReason: undefined })).toEqual({ action: 'failed', error: stepFailure });
  });

  it('a waiting attempt that was canceled does not suspend', () => {
    const canceled = new CanceledError('run-1', 'canceled');
    expect(readThrown(canceled, { suspended: true, stepFailure: undefined, stopReason: canceled })).toEqual({ action: 'failed', error: canceled });
  });

  it('a run past its timeout fails with the timeout, whatever the aborted handler threw', () => {
    const timeout = new RunTimeoutError('run-1', 'pay', 50);
    expect(readThrown(boom, { suspended: false, stepFailure, stopReason: timeout })).toEqual({ action: 'failed', error: timeout });
  });

  it('Promise.all rejecting with a stopped sibling reports the step that really failed', () => {
    expect(readThrown(new SiblingStepFailedError('stopped'), { suspended: false, stepFailure, stopReason: undefined })).toEqual({
      action: 'failed',
      error: stepFailure,
    });
  });

  it('anything else fails with what was thrown', () => {
    expect(readThrown(boom, { suspended: false, stepFailure, stopReason: undefined })).toEqual({ action: 'failed', error: boom });
    expect(readThrown('text', { suspended: false, stepFailure: undefined, stopReason: undefined })).toEqual({ action: 'failed', error: 'text' });
  });
});

describe('decideFailure: retry, compensate or fail', () => {
  it('retries after the policy delay while attempts are left', () => {
    const decision = decideFailure(facts());
    expect(decision).toEqual({ action: 'retry', error: expect.objectContaining({ message: 'boom' }), dueAt: NOW + 500 });
  });

  it('fails for good on the last attempt, and runs onFailure when the workflow has it', () => {
    const run = { id: 'run-1', workflow: 'pay', queue: 'default', attempt: 3, maxAttempts: 3 };
    expect(decideFailure(facts({ run }))).toMatchObject({ action: 'fail', onFailure: false });
    expect(decideFailure(facts({ run, workflow: { hasOnFailure: true } }))).toMatchObject({ action: 'fail', onFailure: true });
  });

  it('fails at once on a permanent error, attempts left or not', () => {
    expect(decideFailure(facts({ error: new NonRetriableError('bad card') }))).toMatchObject({ action: 'fail' });
  });

  it('fails when shouldRetry says no, and retries when it says yes', () => {
    const no = decideFailure(facts({ workflow: { retries: { maxAttempts: 3, shouldRetry: () => false }, hasOnFailure: false } }));
    expect(no.action).toBe('fail');
    const yes = decideFailure(facts({ workflow: { retries: { maxAttempts: 3, delay: '2s', shouldRetry: () => true }, hasOnFailure: false } }));
    expect(yes).toMatchObject({ action: 'retry', dueAt: NOW + 2_000 });
  });

  it('a RetryAfterError sets the due time itself', () => {
    expect(decideFailure(facts({ error: new RetryAfterError('rate limited', 7_000) }))).toMatchObject({ action: 'retry', dueAt: NOW + 7_000 });
  });

  it('a retry is never due after the run deadline, so the run wakes to fail on time', () => {
    expect(decideFailure(facts({ deadline: NOW + 100 }))).toMatchObject({ action: 'retry', dueAt: NOW + 100 });
    expect(notAfterDeadline(0, NOW + 100)).toBe(NOW + 100);
    expect(notAfterDeadline(NOW + 50, 0)).toBe(NOW + 50);
  });

  it('a retry policy that throws fails the run with what it threw', () => {
    const policyError = new Error('shouldRetry exploded');
    const decision = decideFailure(
      facts({
        workflow: {
          retries: {
            shouldRetry: () => {
              throw policyError;
            },
          },
          hasOnFailure: true,
        },
      }),
    );
    expect(decision).toEqual({ action: 'fail', error: policyError, onFailure: true });
  });

  it('a final failure with compensations due compensates; a retry never asks', () => {
    const last = { id: 'run-1', workflow: 'pay', queue: 'default', attempt: 3, maxAttempts: 3 };
    expect(decideFailure(facts({ run: last, compensationsDue: () => true }))).toMatchObject({ action: 'compensate' });
    const asked = jest.fn(() => true);
    expect(decideFailure(facts({ compensationsDue: asked })).action).toBe('retry');
    expect(asked).not.toHaveBeenCalled();
  });

  it('a halted run, or one whose workflow is not registered here, does not compensate', () => {
    const last = { id: 'run-1', workflow: 'pay', queue: 'default', attempt: 3, maxAttempts: 3 };
    expect(decideFailure(facts({ run: last, halted: true, compensationsDue: () => true })).action).toBe('fail');
    expect(decideFailure(facts({ run: last, workflow: undefined, compensationsDue: () => true }))).toMatchObject({ action: 'fail', onFailure: false });
  });

  it('a compensating run that failed here ends compensation_failed toward its target, unless this worker must leave it', () => {
    expect(decideFailure(facts({ compensating: true, compensationTarget: 'canceled' }))).toMatchObject({ action: 'end-compensation', target: 'canceled' });
    expect(decideFailure(facts({ compensating: true, halted: true }))).toEqual({ action: 'leave' });
  });

  it("non-determinism with 'retry-latest' moves to the latest version first, then decides as usual", () => {
    const error = new NonDeterminismError('run-1', 2, 'charge', 'refund');
    const workflow = { onNonDeterminism: 'retry-latest' as const, hasOnFailure: false };
    expect(decideFailure(facts({ error, workflow }))).toEqual({ action: 'move-to-latest', error });
    // NonDeterminismError is permanent: with no newer version, the run fails.
    expect(decideFailure(facts({ error, workflow, latestTried: true })).action).toBe('fail');
    // A stopped run is not moved.
    expect(decideFailure(facts({ error, workflow, stopReason: new CanceledError('run-1', 'canceled') })).action).toBe('fail');
    expect(decideFailure(facts({ error })).action).toBe('fail');
  });
});
