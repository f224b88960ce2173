import { isRetryable, RetryAfterError } from '../errors';
import { dueAt, toMs } from './duration';
import type { CheckedStepRetry } from './option-checks';
import type { RetryPolicy, RunInfo } from './workflow-types';

/** Default backoff: 250 ms doubling per attempt, capped at 30 s, plus up to 100 ms of jitter. */
export function defaultRetryDelayMs(attempt: number): number {
  return Math.min(30_000, 250 * 2 ** Math.max(0, attempt - 1)) + Math.floor(Math.random() * 100);
}

/**
 * Decides what happens after a failed attempt: the due time of the next attempt, or null when the
 * run fails for good.
 */
export function nextAttemptAt(policy: RetryPolicy | undefined, run: RunInfo, error: unknown, now: number): number | null {
  if (run.attempt >= run.maxAttempts) return null;
  // Permanent errors (the error table in errors/error-table.ts) fail at once: another attempt would fail the same way.
  if (!isRetryable(error)) return null;
  if (policy?.shouldRetry && !policy.shouldRetry({ run, error })) return null;
  if (error instanceof RetryAfterError) return dueAt(error.delay, now, 'RetryAfterError delay');
  const delay = policy?.delay;
  if (delay === undefined) return now + defaultRetryDelayMs(run.attempt);
  if (typeof delay === 'function') return dueAt(delay({ run, error }), now, `retries.delay of workflow "${run.workflow}"`);
  return now + toMs(delay, `retries.delay of workflow "${run.workflow}"`);
}

/**
 * The wait before the next try of a step retried by its own policy, after `failures` failed tries
 * in this run attempt (1 after the first). `random` is Math.random unless a test fixes it.
 */
export function stepRetryDelayMs(policy: CheckedStepRetry, failures: number, random: () => number = Math.random): number {
  const n = Math.max(1, failures);
  const base = policy.backoff === 'fixed' ? policy.delayMs : policy.backoff === 'linear' ? policy.delayMs * n : policy.delayMs * 2 ** (n - 1);
  const capped = Math.min(policy.maxDelayMs, base);
  return Math.round(capped - capped * policy.jitter * random());
}
