/**
 * The duration syntax every option and `RetryAfterError` accept, with no imports: the one piece of
 * `definition/` that `errors/` may use.
 */

/** A duration: milliseconds, or a string such as `"500ms"`, `"5s"`, `"1m"`, `"2h"`, `"1d"`. */
export type Duration = number | string;

const DAY_MS = 86_400_000;

/** The longest duration, and the furthest future timestamp, any option accepts: 10 years in ms. */
export const MAX_DURATION_MS = 10 * 365 * DAY_MS;

/** The longest duration a Node.js timer can wait (2^31 - 1 ms, about 24.8 days): options that become a timer stop there. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)\s*$/;
const UNIT_MS: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: DAY_MS };

/**
 * Milliseconds of a number of ms or a string like "500ms", "5s", "1.5m", "2h", "1d"; `NaN` for
 * anything else. Unchecked: the caller decides which range is allowed.
 */
export function parseDurationMs(value: unknown): number {
  if (typeof value === 'number') return value;
  if (typeof value !== 'string') return NaN;
  const m = DURATION.exec(value);
  return m ? Number(m[1]) * UNIT_MS[m[2]] : NaN;
}
