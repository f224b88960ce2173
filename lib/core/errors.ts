/**
 * Public error classes. Every class sets `name`, so `instanceof` and `error.name` both work, and every
 * message names the thing involved and what to do about it. Every meaningful constructor argument is
 * a `readonly` field: serialization stores the fields, so an error read back from Redis keeps them.
 */
// duration.ts imports ConfigurationError from here too; the cycle is safe because both sides
// use the other's exports only inside functions, never while the module loads.
import { MAX_DURATION_MS, parseDurationMs } from './definition/duration-format';

/** Base class of every error this package throws. */
export class RedflowError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** One problem reported by an input validator. */
export interface ValidationIssue {
  message: string;
  path?: ReadonlyArray<PropertyKey>;
}

/** The workflow input was rejected by the workflow's schema or DTO class. Nothing was stored. */
export class InputValidationError extends RedflowError {
  constructor(
    readonly workflow: string,
    readonly issues: ReadonlyArray<ValidationIssue>,
    /** What was invalid, when it is not the workflow's input (a signal's payload, say). */
    subject?: string,
  ) {
    const detail = issues
      .slice(0, 5)
      .map((i) => (i.path && i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message))
      .join('; ');
    super(
      subject
        ? `${subject} is invalid: ${detail}. Fix it to match its schema.`
        : `Input for workflow "${workflow}" is invalid: ${detail}. Fix the input to match the workflow's schema.`,
    );
  }
}

/** No workflow with this name is registered locally or in Redis. */
export class UnknownWorkflowError extends RedflowError {
  constructor(
    readonly workflow: string,
    readonly where = 'in this process or in Redis',
    /** How workflows are defined where the error is read: `defineWorkflow()`, or `@Workflow()` in Nest. */
    definedBy = 'Define it with defineWorkflow() and start a worker (or call syncRegistry()) that registers it.',
  ) {
    super(`Workflow "${workflow}" is not registered ${where}. ${definedBy}`);
  }
}

/**
 * A value (a step or workflow output, an input, an event payload) holds something JSON would drop
 * or change, so it cannot be stored. `path` says where, e.g. `$.items[2]`; `$` is the value itself.
 */
export class OutputSerializationError extends RedflowError {
  constructor(
    /** The value, e.g. `The output of step "charge"`. */
    readonly what: string,
    /** Where in the value the problem is: `$` for the value itself, `$.a.b[2]` inside it. */
    readonly path: string,
    /** What is there and what JSON would do with it, e.g. `NaN (JSON would store null)`. */
    readonly reason: string,
  ) {
    super(
      `${what} cannot be stored as JSON: ${path} is ${reason}. Use plain JSON data: objects, arrays, strings, numbers, booleans, null or Dates (stored as ISO strings).`,
    );
  }
}

/** The client was closed while a call of it was still waiting (`result()`, `waitForRun`). */
export class ClientClosedError extends RedflowError {
  constructor(readonly what: string) {
    super(`${what} stopped: its client was closed. Close the client only after the waits you need are over, or wait with a client that stays open.`);
  }
}

/** A step or a wait for a run's result took longer than its `timeoutMs`. */
export class TimeoutError extends RedflowError {
  constructor(readonly what: string, readonly timeoutMs: number) {
    super(`${what} timed out after ${timeoutMs} ms. Raise timeoutMs if it needs longer.`);
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

/** The run was canceled. */
export class CanceledError extends RedflowError {
  constructor(readonly runId: string, readonly reason?: string) {
    super(`Run "${runId}" was canceled${reason ? `: ${reason}` : ''}.`);
  }
}

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

/** The idempotency key is already used by a run with a different input. */
export class IdempotencyConflictError extends RedflowError {
  constructor(
    readonly workflow: string,
    readonly idempotencyKey: string,
    readonly existingRunId: string,
  ) {
    super(
      `Idempotency key "${idempotencyKey}" of workflow "${workflow}" is already used by run "${existingRunId}" with a different input. Use a new key for a different input.`,
    );
  }
}

/** An input or a step output is larger than `maxPayloadBytes`. */
export class PayloadTooLargeError extends RedflowError {
  constructor(
    readonly what: string,
    readonly bytes: number,
    readonly limit: number,
    fix = 'Store large data elsewhere and pass a reference, or raise maxPayloadBytes.',
  ) {
    super(`${what} is ${bytes} bytes, over the ${limit}-byte limit. ${fix}`);
  }
}

/** Data found in Redis could not be read: a run hash without its fields, or undecodable JSON. */
export class CorruptRunDataError extends RedflowError {
  constructor(
    readonly runId: string,
    readonly detail: string,
  ) {
    super(`Run "${runId}" has corrupt data in Redis (${detail}). The run cannot continue; start a new run.`);
  }
}

/**
 * The run's worker died (or stalled) more than `maxRecoveries` times while running it: it failed.
 * Runs fail with its subclass `RunCrashedError` now; runs stored by older versions still read back
 * as this class.
 */
export class RunStalledError extends RedflowError {}

/**
 * The run's attempts kept dying with their worker (a crash, out of memory, a blocked event loop):
 * its lease expired `crashes` times in a row, more than the workers' `maxRecoveries`, so it failed
 * instead of taking more workers down. An attempt that stores a step or ends resets the count.
 * Stored by the reaper's script; `workerId` is the worker that held the last attempt.
 */
export class RunCrashedError extends RunStalledError {
  constructor(
    readonly runId: string,
    /** Leases that expired in a row, the last one included. */
    readonly crashes: number,
    /** The id of the worker that held the last attempt (from its lease token). */
    readonly workerId: string,
  ) {
    super(
      `Run "${runId}" crashed its worker ${crashes} times in a row (last on worker "${workerId}"): each attempt died or stopped renewing its lease (a crash, out of memory, or a blocked event loop in this run?). It was failed so it stops taking workers down; fix the cause, then resume or re-run it.`,
    );
  }
}

/** The run was terminated by an operator (`terminate`): it ended at once, without cleanup. */
export class RunTerminatedError extends RedflowError {
  constructor(
    readonly runId: string,
    readonly reason?: string,
  ) {
    super(`Run "${runId}" was terminated${reason ? `: ${reason}` : ''}.`);
  }
}

/** `deleteRun` of a run that has not ended, without `{ force: true }`: nothing was deleted. */
export class RunNotEndedError extends RedflowError {
  constructor(
    readonly runId: string,
    /** The run's status when it was refused. */
    readonly status: string,
  ) {
    super(
      `Run "${runId}" is ${status}: only an ended run can be deleted. End it first (cancelRun or terminate), or pass { force: true } to terminate and delete it in one step.`,
    );
  }
}

/** No run has this id under the client's prefix. */
export class RunNotFoundError extends RedflowError {
  constructor(readonly runId: string) {
    super(`Run "${runId}" does not exist: the id is wrong, it belongs to another prefix, or retention deleted the run.`);
  }
}

/** `resume` of a run that is not failed, canceled or terminated: a live run goes on by itself, a succeeded one is done. */
export class RunNotResumableError extends RedflowError {
  constructor(
    readonly runId: string,
    /** The run's status when it was refused. */
    readonly status: string,
  ) {
    const fix =
      status === 'succeeded'
        ? 'Use rerun() to run its workflow again as a new run.'
        : status === 'compensating'
          ? 'Its compensations are running: wait for it to end.'
          : 'Wait for it to end, or cancel it first (cancelRun) and then resume it.';
    super(`Run "${runId}" is ${status}: only a failed, canceled, compensation_failed or terminated run can be resumed. ${fix}`);
  }
}

/**
 * A replay reached steps in an order the run's journal contradicts: the code changed under a
 * run in flight (a completed step renamed or removed, a step inserted before a completed one).
 * No function of the new step ran. Permanent: the run fails, unless its workflow's
 * `onNonDeterminism` is `'retry-latest'`.
 */
export class NonDeterminismError extends RedflowError {
  constructor(
    readonly runId: string,
    /** 1-based position, in the journal's order, of the step the code did not reach. */
    readonly position: number,
    /** The step name the journal holds at `position`. */
    readonly expected: string,
    /** The step the code reached instead, or `(end of the workflow)` when it returned without it. */
    readonly found: string,
  ) {
    super(
      `Run "${runId}" is not deterministic: step ${position} of its journal is "${expected}", but the code reached "${found}" instead. The workflow changed under a run in flight: restore the step, guard the change with step.patched(), or deploy it as a new version (option version).`,
    );
  }
}

/** A run has as many buffered signals as it may hold: the signal was not stored. */
export class SignalBufferFullError extends RedflowError {
  constructor(
    readonly runId: string,
    readonly signal: string,
    readonly limit: number,
  ) {
    super(
      `Run "${runId}" already holds ${limit} signals that no step.waitForSignal has consumed, so signal "${signal}" was refused. Make the workflow wait for its signals, or send fewer.`,
    );
  }
}

/** A worker or client option is invalid. */
export class ConfigurationError extends RedflowError {}

/** A cron expression or time zone cannot be parsed. */
export class InvalidCronError extends ConfigurationError {
  constructor(
    readonly workflow: string,
    readonly expression: string,
    readonly timezone: string | undefined,
    readonly reason: string,
  ) {
    super(
      `Cron expression "${expression}"${timezone ? ` with time zone "${timezone}"` : ''} of workflow "${workflow}" is invalid (${reason}). Use croner syntax, e.g. "*/10 * * * * *" (seconds first) or "0 9 * * 1-5", and an IANA time zone such as "Europe/Paris".`,
    );
  }
}

/** The run started more often than its workflow's `rateLimit` allows; it failed before its handler. */
export class RateLimitExceededError extends RedflowError {}

/** The error a run failed with, rebuilt from its stored form when its class is not one of ours. */
export class WorkflowRunError extends RedflowError {
  constructor(
    message: string,
    /** The `name` of the error as it was thrown, e.g. `TypeError`. */
    readonly originalName: string,
  ) {
    super(message);
  }
}

/** The longest Redis reply an error message quotes; replies of failed scripts can be long. */
const MAX_REPLY_CHARS = 300;

/** The first line of a Redis error reply, at most 300 characters, so no Lua source leaks into messages. */
function shortReply(reply: string): string {
  const line = String(reply).split(/\r?\n/, 1)[0].trim();
  return line.length > MAX_REPLY_CHARS ? `${line.slice(0, MAX_REPLY_CHARS - 1)}…` : line;
}

/** A reply without its final period, so the sentence around it does not end with two. */
function inSentence(reply: string): string {
  return reply.replace(/\.+$/, '');
}

/**
 * Redis cannot be reached: the connection is down, or it gave no answer in time. The call may
 * still be applied once Redis answers again.
 */
export class RedisUnavailableError extends RedflowError {
  constructor(
    /** `host:port` (or socket path) of the Redis, never with its password. */
    readonly address: string,
    /** What went wrong, e.g. `connect ECONNREFUSED` or `no answer within 5000 ms`. */
    readonly detail: string,
  ) {
    super(
      `Redis at ${address} is unavailable (${detail}). Check that Redis is running and reachable from this host (REDIS_URL or the connection option). A call that timed out may still be applied when Redis comes back: retry it with an idempotency key.`,
    );
  }
}

/**
 * Redis answered but refused to write: it is out of memory (OOM), a read-only replica (READONLY),
 * or cannot persist to disk (MISCONF). Nothing of the call was applied.
 */
export class RedisWriteRefusedError extends RedflowError {
  /** The refusal, first line only, at most 300 characters. */
  readonly reply: string;

  constructor(
    /** The name of the Lua script (or command) that was refused. */
    readonly script: string,
    reply: string,
  ) {
    const short = shortReply(reply);
    super(
      `Redis refused a write in script "${script}": ${inSentence(short)}. Free memory or raise maxmemory (OOM), connect to the primary instead of a replica (READONLY), or fix the disk Redis persists to (MISCONF). Workers pause and resume by themselves once writes succeed.`,
    );
    this.reply = short;
  }
}

/** One of this package's Lua scripts answered with an error other than a refused write. */
export class RedisScriptError extends RedflowError {
  /** The error reply, first line only, at most 300 characters. */
  readonly reply: string;

  constructor(
    /** The name of the Lua script. */
    readonly script: string,
    reply: string,
  ) {
    const short = shortReply(reply);
    super(`Redis script "${script}" failed: ${inSentence(short)}.`);
    this.reply = short;
  }
}

// A refusal comes as the reply itself ("OOM command not allowed ...") or, from inside a script on
// older Redis, wrapped: "ERR Error running script (...): @user_script:12: -OOM command ...".
const WRITE_REFUSED = /(?:^-?|:\s*-?|\s-)(?:OOM|READONLY|MISCONF)(?=\s|$)/;

/** True when a Redis error message (plain or wrapped by a Lua script) says Redis refuses writes. */
export function isWriteRefusedReply(message: string): boolean {
  return WRITE_REFUSED.test(message);
}

/** A concrete error class of this package. */
export type RedflowErrorClass = abstract new (...args: never[]) => RedflowError;

/** How the engine treats one error class. */
export interface ErrorClassInfo {
  /** The class; its name is the `name` stored with the error, and read back into this class. */
  readonly cls: RedflowErrorClass;
  /** Whether a failed attempt with this error may be retried; `false` fails the run at once. */
  readonly retryable: boolean;
  /** Fields that may hold a Date: stored as an ISO string, read back as a Date. */
  readonly dateFields?: ReadonlyArray<string>;
}

/**
 * The one list of this package's error classes: retries (`isRetryable`) and reading errors back
 * from Redis both use it. An error whose class is not listed, nor a subclass of a listed class, is
 * retryable and reads back as a `WorkflowRunError`.
 */
const ERROR_CLASSES: ReadonlyArray<ErrorClassInfo> = [
  // Permanent: another attempt with the same input and code fails the same way.
  { cls: NonRetriableError, retryable: false },
  { cls: InputValidationError, retryable: false },
  { cls: OutputSerializationError, retryable: false },
  { cls: PayloadTooLargeError, retryable: false },
  { cls: CorruptRunDataError, retryable: false },
  { cls: UnknownWorkflowError, retryable: false },
  { cls: CanceledError, retryable: false },
  { cls: ConfigurationError, retryable: false },
  { cls: InvalidCronError, retryable: false },
  { cls: RateLimitExceededError, retryable: false },
  { cls: IdempotencyConflictError, retryable: false },
  { cls: RunNotFoundError, retryable: false },
  { cls: SignalBufferFullError, retryable: false },
  { cls: RunNotResumableError, retryable: false },
  { cls: RunTerminatedError, retryable: false },
  { cls: RunCrashedError, retryable: false },
  { cls: RunNotEndedError, retryable: false },
  // A run's timeout counts from its first start: another attempt would start past it.
  { cls: RunTimeoutError, retryable: false },
  { cls: NonDeterminismError, retryable: false },
  // Retryable: the cause may be gone by the next attempt.
  { cls: RedflowError, retryable: true },
  { cls: TimeoutError, retryable: true },
  { cls: StepHeartbeatTimeoutError, retryable: true },
  { cls: RetryAfterError, retryable: true, dateFields: ['delay'] },
  { cls: RunStalledError, retryable: true },
  { cls: WorkflowRunError, retryable: true },
  { cls: RedisUnavailableError, retryable: true },
  { cls: RedisWriteRefusedError, retryable: true },
  { cls: RedisScriptError, retryable: true },
  { cls: ClientClosedError, retryable: true },
];

const BY_CLASS = new Map<unknown, ErrorClassInfo>(ERROR_CLASSES.map((info) => [info.cls, info]));
const BY_NAME = new Map<string, ErrorClassInfo>(ERROR_CLASSES.map((info) => [info.cls.name, info]));

/** Every error class of this package with how the engine treats it, in the table's order. */
export function errorClasses(): ReadonlyArray<ErrorClassInfo> {
  return ERROR_CLASSES;
}

/** The table entry of the error class with this name (as stored with an error), if it is one of ours. */
export function errorClassNamed(name: string): ErrorClassInfo | undefined {
  return BY_NAME.get(name);
}

/**
 * Whether a failed attempt with `error` may be retried. The nearest listed class on the error's
 * prototype chain decides, so a subclass of `NonRetriableError` or `ConfigurationError` is
 * permanent too; anything else (including non-Error values) is retryable.
 */
export function isRetryable(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return true;
  for (let proto: unknown = Object.getPrototypeOf(error); proto !== null && proto !== Object.prototype; proto = Object.getPrototypeOf(proto)) {
    const info = BY_CLASS.get((proto as { constructor?: unknown }).constructor);
    if (info) return info.retryable;
  }
  return true;
}
