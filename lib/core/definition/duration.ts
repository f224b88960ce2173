import type { Duration } from './duration-format';
import { checkDuration, checkTimestamp, renamedDuration } from './option-checks';

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

/**
 * How long an idempotency key is kept, in whole seconds (Redis expires keys in seconds): the
 * options' `idempotencyWindow`, or their deprecated `idempotencyTtl` in seconds. `what` names the
 * call in messages, e.g. `start options`.
 */
export function idempotencyTtlSec(options: { idempotencyWindow?: Duration; idempotencyTtl?: number } | undefined, what: string): number {
  const ms = renamedDuration(options, { name: 'idempotencyWindow', deprecated: 'idempotencyTtl', unitMs: 1_000, label: (key) => `${key} of ${what}` });
  return ms === undefined ? DEFAULT_IDEMPOTENCY_TTL_SEC : Math.max(1, Math.ceil(ms / 1_000));
}

/** Epoch ms of a Date or epoch-ms option, at most 10 years ahead; 0 when not given. */
export function timeOption(value: Date | number | undefined, what: string): number {
  if (value === undefined) return 0;
  return checkTimestamp(value, what);
}
