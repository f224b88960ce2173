import { dueAt, toMs } from './duration';
import {
  CanceledError,
  CorruptRunDataError,
  InputValidationError,
  NonRetriableError,
  OutputSerializationError,
  PayloadTooLargeError,
  RetryAfterError,
  UnknownWorkflowError,
} from './errors';
import type { RetryPolicy, RunInfo } from './workflow';

/** Errors that fail a run at once: retrying cannot change their outcome. */
const PERMANENT_ERRORS = [
  NonRetriableError,
  InputValidationError,
  OutputSerializationError,
  PayloadTooLargeError,
  CorruptRunDataError,
  UnknownWorkflowError,
  CanceledError,
];

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
  if (PERMANENT_ERRORS.some((cls) => error instanceof cls)) return null;
  if (policy?.shouldRetry && !policy.shouldRetry({ run, error })) return null;
  if (error instanceof RetryAfterError) return dueAt(error.delay, now, 'RetryAfterError delay');
  const delay = policy?.delay;
  if (delay === undefined) return now + defaultRetryDelayMs(run.attempt);
  if (typeof delay === 'function') return dueAt(delay({ run, error }), now, `retries.delay of workflow "${run.workflow}"`);
  return now + toMs(delay, `retries.delay of workflow "${run.workflow}"`);
}
