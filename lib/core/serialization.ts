import {
  CanceledError,
  CorruptRunDataError,
  IdempotencyConflictError,
  InputValidationError,
  NonRetriableError,
  OutputSerializationError,
  PayloadTooLargeError,
  RateLimitExceededError,
  RedflowError,
  RetryAfterError,
  RunStalledError,
  TimeoutError,
  UnknownWorkflowError,
  WorkflowRunError,
} from './errors';

/** The stored form of an error. */
export interface SerializedError {
  name: string;
  message: string;
  stack?: string;
  issues?: unknown;
}

/** The default largest input or step output, in bytes: 1 MiB. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

function rejectNonJson(this: unknown, _key: string, value: unknown): unknown {
  switch (typeof value) {
    case 'function':
    case 'symbol':
      throw new TypeError(`a ${typeof value} is not JSON`);
    case 'object':
      if (value instanceof Map || value instanceof Set) throw new TypeError(`a ${value.constructor.name} is not JSON`);
  }
  return value;
}

/**
 * Encodes a value as JSON for storage. `undefined` is stored as an empty string. Throws
 * `OutputSerializationError` for values JSON would silently change (functions, Maps, BigInts,
 * cycles) and `PayloadTooLargeError` above `limit` bytes.
 */
export function encodeJson(value: unknown, what: string, limit: number): string {
  if (value === undefined) return '';
  let text: string;
  try {
    text = JSON.stringify(value, rejectNonJson);
  } catch (error) {
    throw new OutputSerializationError(what, (error as Error).message);
  }
  if (text === undefined) throw new OutputSerializationError(what, 'it has no JSON form');
  // A UTF-16 code unit is at most 3 UTF-8 bytes, so short strings skip the exact count.
  if (text.length * 3 > limit) {
    const bytes = Buffer.byteLength(text);
    if (bytes > limit) throw new PayloadTooLargeError(what, bytes, limit);
  }
  return text;
}

/** Decodes a stored JSON value; the empty string is `undefined`. Throws `CorruptRunDataError`. */
export function decodeJson(text: string | undefined, runId: string, field: string): unknown {
  if (text === undefined || text === '') return undefined;
  try {
    return JSON.parse(text);
  } catch {
    throw new CorruptRunDataError(runId, `field "${field}" is not valid JSON`);
  }
}

/** Encodes an error for storage; never throws. */
export function serializeError(error: unknown): string {
  const err = error instanceof Error ? error : new Error(typeof error === 'string' ? error : JSON.stringify(error) ?? String(error));
  const out: SerializedError = { name: err.name, message: err.message, stack: err.stack };
  const issues = (err as { issues?: unknown }).issues;
  if (issues !== undefined) out.issues = issues;
  try {
    return JSON.stringify(out);
  } catch {
    return JSON.stringify({ name: err.name, message: err.message });
  }
}

const KNOWN_ERRORS: Record<string, new (...args: never[]) => RedflowError> = {
  CanceledError,
  CorruptRunDataError,
  IdempotencyConflictError,
  InputValidationError,
  NonRetriableError,
  OutputSerializationError,
  PayloadTooLargeError,
  RateLimitExceededError,
  RetryAfterError,
  RunStalledError,
  TimeoutError,
  UnknownWorkflowError,
};

/**
 * Rebuilds a stored error. Our own error classes come back as instances of their class, so
 * `instanceof` works on a run's error; any other error becomes a `WorkflowRunError` that keeps the
 * original name and message.
 */
export function deserializeError(text: string | undefined): Error {
  let data: SerializedError;
  try {
    data = JSON.parse(text ?? '');
  } catch {
    return new WorkflowRunError('The run failed, but its stored error could not be read.', 'Error');
  }
  const cls = KNOWN_ERRORS[data.name];
  const error: Error = cls ? Object.create(cls.prototype) : new WorkflowRunError(data.message, data.name);
  Object.defineProperty(error, 'message', { value: data.message, writable: true, configurable: true });
  Object.defineProperty(error, 'name', { value: data.name, writable: true, configurable: true });
  if (data.stack) Object.defineProperty(error, 'stack', { value: data.stack, writable: true, configurable: true });
  if (data.issues !== undefined) (error as { issues?: unknown }).issues = data.issues;
  return error;
}
