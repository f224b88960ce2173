import type { Duration } from './duration-format';
import { checkDuration, checkInteger, checkTimestamp, MAX_DURATION_MS } from './option-checks';

export type { Duration };

/**
 * Converts a duration to milliseconds. Throws `ConfigurationError` for anything but a number of
 * ms or a duration string from 0 to 10 years.
 */
export function toMs(value: Duration, what = 'duration'): number {
  return checkDuration(value, what, { allowZero: true });
}

/** Converts a delay (duration or absolute Date) to a due time in epoch ms. */
export function dueAt(value: Duration | Date, now: number, what = 'delay'): number {
  if (value instanceof Date) return checkTimestamp(value, what, now);
  return now + toMs(value, what);
}

/** Default lifetime of an idempotency key: 7 days. */
export const DEFAULT_IDEMPOTENCY_TTL_SEC = 7 * 24 * 60 * 60;

/** The idempotency TTL in seconds, validated. */
export function idempotencyTtlSec(ttl: number | undefined): number {
  return checkInteger(ttl ?? DEFAULT_IDEMPOTENCY_TTL_SEC, 'idempotencyTtl (seconds)', 1, MAX_DURATION_MS / 1000);
}

/** Epoch ms of a Date or epoch-ms option, at most 10 years ahead; 0 when not given. */
export function timeOption(value: Date | number | undefined, what: string): number {
  if (value === undefined) return 0;
  return checkTimestamp(value, what);
}
