/**
 * Public error classes. Every class sets `name`, so `instanceof` and `error.name` both work, and every
 * message names the thing involved and what to do about it.
 */

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
  ) {
    const detail = issues
      .slice(0, 5)
      .map((i) => (i.path && i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message))
      .join('; ');
    super(`Input for workflow "${workflow}" is invalid: ${detail}. Fix the input to match the workflow's schema.`);
  }
}

/** No workflow with this name is registered locally or in Redis. */
export class UnknownWorkflowError extends RedflowError {
  constructor(readonly workflow: string, where = 'in this process or in Redis') {
    super(
      `Workflow "${workflow}" is not registered ${where}. Define it with defineWorkflow() and start a worker (or call syncRegistry()) that registers it.`,
    );
  }
}

/** A workflow or step returned a value that cannot be stored as JSON. */
export class OutputSerializationError extends RedflowError {
  constructor(readonly what: string, reason: string) {
    super(`${what} cannot be stored as JSON (${reason}). Use plain JSON data: objects, arrays, strings, numbers, booleans or null.`);
  }
}

/** A step or a wait for a run's result took longer than its `timeoutMs`. */
export class TimeoutError extends RedflowError {
  constructor(readonly what: string, readonly timeoutMs: number) {
    super(`${what} timed out after ${timeoutMs} ms. Raise timeoutMs if it needs longer.`);
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

/** Throw it to retry the run after `delay` (ms, a duration string such as "30s", or a Date). */
export class RetryAfterError extends RedflowError {
  constructor(
    message: string,
    readonly delay: number | string | Date,
  ) {
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
  ) {
    super(`${what} is ${bytes} bytes, over the ${limit}-byte limit. Store large data elsewhere and pass a reference, or raise maxPayloadBytes.`);
  }
}

/** Data found in Redis could not be read: a run hash without its fields, or undecodable JSON. */
export class CorruptRunDataError extends RedflowError {
  constructor(readonly runId: string, detail: string) {
    super(`Run "${runId}" has corrupt data in Redis (${detail}). The run cannot continue; start a new run.`);
  }
}

/** The run's worker died (or stalled) more than `maxRecoveries` times while running it: it failed. */
export class RunStalledError extends RedflowError {}

/** No run has this id under the client's prefix. */
export class RunNotFoundError extends RedflowError {
  constructor(readonly runId: string) {
    super(`Run "${runId}" does not exist: the id is wrong, it belongs to another prefix, or retention deleted the run.`);
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
    reason: string,
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
  constructor(message: string, readonly originalName: string) {
    super(message);
  }
}
