/** A step, a wait or a whole run that took longer than it may. */
import { RedflowError } from './redflow-error';

/** A step or a wait for a run's result took longer than its `timeout` (`timeoutMs` is that timeout, in ms). */
export class TimeoutError extends RedflowError {
  constructor(
    readonly what: string,
    readonly timeoutMs: number,
  ) {
    super(`${what} timed out after ${timeoutMs} ms. Raise its timeout if it needs longer.`);
  }
}

/**
 * The run was still not over when its `timeout` (counted from its first start, waits included)
 * ran out: it failed for good, whatever its retry policy says.
 */
export class RunTimeoutError extends TimeoutError {
  constructor(
    readonly runId: string,
    readonly workflow: string,
    timeoutMs: number,
  ) {
    super(`Run "${runId}" of workflow "${workflow}"`, timeoutMs);
    this.message = `Run "${runId}" of workflow "${workflow}" did not end within its timeout of ${timeoutMs} ms (counted from its first start, waits included). Raise the workflow's timeout option, or pass a longer timeout when starting the run.`;
  }
}

/** A step with `heartbeatTimeout` went longer than that without calling `heartbeat()`: its try failed. */
export class StepHeartbeatTimeoutError extends TimeoutError {
  constructor(
    readonly step: string,
    timeoutMs: number,
  ) {
    super(`Step "${step}"`, timeoutMs);
    this.message = `Step "${step}" did not call heartbeat() for ${timeoutMs} ms (its heartbeatTimeout), so this try failed. Call heartbeat() more often than that while the step works, or raise heartbeatTimeout.`;
  }
}
