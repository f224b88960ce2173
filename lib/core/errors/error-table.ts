/**
 * The error table: each error class of this package with whether a failed attempt may be retried
 * and which fields hold Dates. Serialization (`store/serialization.ts`) and the retry decision read
 * it, so a new class is added here once.
 */
import { ConfigurationError, InvalidCronError, UnknownWorkflowError } from './configuration-errors';
import { InputValidationError, OutputSerializationError, PayloadCodecError, PayloadKeyError, PayloadTooLargeError } from './payload-errors';
import { RedflowError } from './redflow-error';
import { RedisScriptError, RedisUnavailableError, RedisWriteRefusedError } from './redis-errors';
import { NonRetriableError, RetryAfterError } from './retry-errors';
import {
  CanceledError,
  ClientClosedError,
  CorruptRunDataError,
  IdempotencyConflictError,
  NonDeterminismError,
  RateLimitExceededError,
  RunCrashedError,
  RunNotEndedError,
  RunNotFoundError,
  RunNotResumableError,
  RunStalledError,
  RunTerminatedError,
  SignalBufferFullError,
  WorkflowRunError,
} from './run-errors';
import { RunTimeoutError, StepHeartbeatTimeoutError, TimeoutError } from './timeout-errors';

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
  // A worker without the key (or codec) a payload needs: another worker, or this one after a
  // fixed deploy, may have it.
  { cls: PayloadKeyError, retryable: true },
  { cls: PayloadCodecError, retryable: true },
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
