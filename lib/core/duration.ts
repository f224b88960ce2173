import { ConfigurationError } from './errors';

/** A duration: milliseconds, or a string such as `"500ms"`, `"5s"`, `"1m"`, `"2h"`, `"1d"`. */
export type Duration = number | string;

const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** Converts a duration to milliseconds; throws `ConfigurationError` for anything else. */
export function toMs(value: Duration, what = 'duration'): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value) && value >= 0) return value;
  } else if (typeof value === 'string') {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/.exec(value);
    if (m) return Math.round(Number(m[1]) * UNIT_MS[m[2]]);
  }
  throw new ConfigurationError(
    `${what} ${JSON.stringify(value)} is not a valid duration. Use milliseconds (a number >= 0) or a string like "500ms", "5s", "1m", "2h", "1d".`,
  );
}

/** Converts a delay (duration or absolute Date) to a due time in epoch ms. */
export function dueAt(value: Duration | Date, now: number, what = 'delay'): number {
  if (value instanceof Date) {
    const t = value.getTime();
    if (Number.isNaN(t)) throw new ConfigurationError(`${what} is an invalid Date. Pass a valid Date.`);
    return t;
  }
  return now + toMs(value, what);
}

/** Default lifetime of an idempotency key: 7 days. */
export const DEFAULT_IDEMPOTENCY_TTL_SEC = 7 * 24 * 60 * 60;

/** The idempotency TTL in seconds, validated. */
export function idempotencyTtlSec(ttl: number | undefined): number {
  const value = ttl ?? DEFAULT_IDEMPOTENCY_TTL_SEC;
  if (!Number.isInteger(value) || value < 1) throw new ConfigurationError(`idempotencyTtl must be a whole number of seconds >= 1, got ${value}.`);
  return value;
}

/** Epoch ms of a Date or epoch-ms option; 0 when not given. */
export function timeOption(value: Date | number | undefined, what: string): number {
  if (value === undefined) return 0;
  const t = value instanceof Date ? value.getTime() : value;
  if (!Number.isFinite(t)) throw new ConfigurationError(`${what} must be a valid Date or epoch milliseconds, got ${String(value)}.`);
  return t;
}

