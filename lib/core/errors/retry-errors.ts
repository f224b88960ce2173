/** What a handler or step throws to steer its run's retries: fail at once, or retry after a delay. */
import { MAX_DURATION_MS, parseDurationMs } from '../definition/duration-format';
import { RedflowError } from './redflow-error';

/** Throw it from a handler or step to fail the run at once, without retries. */
export class NonRetriableError extends RedflowError {}

function describeDelay(delay: unknown): string {
  if (typeof delay === 'string') return JSON.stringify(delay);
  if (typeof delay === 'number') return String(delay);
  if (delay instanceof Date) return Number.isNaN(delay.getTime()) ? 'an invalid Date' : delay.toISOString();
  if (delay === null || delay === undefined) return String(delay);
  return typeof delay === 'object' ? 'an object' : `a ${typeof delay}`;
}

/** A Date at most 10 years ahead, or a duration from 0 to 10 years (the bound of every duration option). */
function isValidDelay(delay: unknown): boolean {
  if (delay instanceof Date) return !Number.isNaN(delay.getTime()) && delay.getTime() <= Date.now() + MAX_DURATION_MS;
  const ms = parseDurationMs(delay);
  return ms >= 0 && ms <= MAX_DURATION_MS;
}

/**
 * Throw it to retry the run after `delay`: milliseconds (a finite number >= 0), a duration string
 * such as "30s", or a Date. A bad `delay` makes the constructor throw a `TypeError` at once, so
 * the mistake surfaces where it is made and the attempt fails like any other error.
 */
export class RetryAfterError extends RedflowError {
  constructor(
    message: string,
    readonly delay: number | string | Date,
  ) {
    // Checked here rather than when the retry is scheduled: there a bad delay could only be
    // reported far from the code that made it.
    if (!isValidDelay(delay)) {
      throw new TypeError(
        `RetryAfterError delay ${describeDelay(delay)} is not valid. Use milliseconds (a finite number from 0 to 10 years), a duration string such as "500ms", "30s", "5m", "2h" or "1d", or a valid Date at most 10 years ahead.`,
      );
    }
    super(message);
  }
}
