import type { StoredError } from '../definition/run-types';
import {
  CorruptRunDataError,
  errorClassNamed,
  InputValidationError,
  OutputSerializationError,
  PayloadTooLargeError,
  RedflowError,
  WorkflowRunError,
} from '../errors';

/**
 * The start of a stored JSON string that is an envelope rather than a user's string (payloads.ts):
 * `\u0001rfc:` a payload the codec encoded, `\u0001rfp:` a user's string that starts with this
 * mark, escaped so that it reads back as itself.
 */
export const ENVELOPE_MARK = '\u0001rf';
/** The envelope of a user's string that starts with ENVELOPE_MARK: its JSON text follows. */
export const PLAIN_MARK = `${ENVELOPE_MARK}p:`;

/** The default largest input or step output, in bytes: 1 MiB. */
export const DEFAULT_MAX_PAYLOAD_BYTES = 1024 * 1024;

/** Marks a failed fast-path encode; the slow walk then finds where and why. */
const NOT_JSON = Symbol('not JSON');

/** Objects JSON stores as `{}` (their data is not in enumerable properties), with what to do instead. */
const OPAQUE: ReadonlyArray<readonly [name: string, cls: abstract new (...args: never[]) => object, advice: string]> = [
  ['Map', Map, 'JSON would store {}; convert it with Object.fromEntries(map)'],
  ['Set', Set, 'JSON would store {}; convert it with Array.from(set)'],
  ['WeakMap', WeakMap, 'JSON would store {}'],
  ['WeakSet', WeakSet, 'JSON would store {}'],
  ['WeakRef', WeakRef, 'JSON would store {}'],
  ['Promise', Promise, 'JSON would store {}; await it first'],
  ['RegExp', RegExp, 'JSON would store {}; store its source as a string'],
  ['Error', Error, 'JSON would drop its message; store the message as a string'],
];

function article(name: string): string {
  return /^[AEIO]/.test(name) ? `an ${name}` : `a ${name}`;
}

/**
 * Why JSON cannot store a value faithfully, or undefined when it can. `raw` is the value as found,
 * `value` the one after its `toJSON()` (they differ for Dates and Buffers). A Date (valid) is
 * accepted: JSON stores its ISO string.
 */
function notJsonReason(raw: unknown, value: unknown, inArray: boolean): string | undefined {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return undefined;
    case 'number':
      if (Number.isFinite(value)) return undefined;
      return `${String(value)} (JSON would store null)`;
    case 'undefined':
      // JSON omits an undefined property, which reads back as undefined: nothing is lost. In an
      // array it becomes null.
      return inArray ? 'undefined (JSON would store null)' : undefined;
    case 'bigint':
      return 'a BigInt (JSON cannot store BigInts; store it as a string)';
    case 'function':
      return 'a function (JSON cannot store functions)';
    case 'symbol':
      return 'a symbol (JSON cannot store symbols)';
  }
  // An object, or null. A Date with no time becomes null through its toJSON(), and a Buffer
  // becomes {type, data}: both show only in `raw`.
  if (raw !== value && typeof raw === 'object' && raw !== null) {
    if (raw instanceof Date) return Number.isNaN(raw.getTime()) ? 'an invalid Date (JSON would store null)' : undefined;
    if (Buffer.isBuffer(raw)) return binaryReason('Buffer');
  }
  if (value === null) return undefined;
  // Plain objects and arrays are nearly all values: skip the class checks for them.
  const proto: unknown = Object.getPrototypeOf(value);
  if (proto === Object.prototype || proto === Array.prototype || proto === null) return undefined;
  if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer || value instanceof SharedArrayBuffer) {
    return binaryReason(Buffer.isBuffer(value) ? 'Buffer' : ((value as object).constructor?.name ?? 'binary buffer'));
  }
  for (const [name, cls, advice] of OPAQUE) {
    if (value instanceof cls) return `${article(name)} (${advice})`;
  }
  return undefined;
}

function binaryReason(name: string): string {
  return `${article(name)} (JSON cannot store binary data; store the bytes as a base64 string)`;
}

function rejectNonJson(this: unknown, key: string, value: unknown): unknown {
  // Reading the holder again only for objects and null keeps strings and numbers cheap.
  const raw = typeof value === 'object' ? (this as Record<string, unknown>)[key] : value;
  if (notJsonReason(raw, value, Array.isArray(this)) !== undefined) throw NOT_JSON;
  return value;
}

function childPath(path: string, key: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

interface Problem {
  path: string;
  reason: string;
}

/**
 * Walks a value the way `JSON.stringify` does and returns the first thing it cannot store. Slow;
 * runs only after the fast path failed, to name the path.
 */
function findProblem(holder: Record<string, unknown>, key: string, path: string, inArray: boolean, ancestors: Map<object, string>): Problem | undefined {
  let raw: unknown;
  let value: unknown;
  try {
    raw = holder[key];
    value = raw;
    if ((typeof value === 'object' && value !== null) || typeof value === 'bigint') {
      const toJSON = (value as { toJSON?: unknown }).toJSON;
      if (typeof toJSON === 'function') value = toJSON.call(value, key);
    }
  } catch (error) {
    return { path, reason: `a value that could not be read (${error instanceof Error ? error.message : String(error)})` };
  }
  const reason = notJsonReason(raw, value, inArray);
  if (reason !== undefined) return { path, reason };
  if (typeof value !== 'object' || value === null) return undefined;
  const seenAt = ancestors.get(value);
  if (seenAt !== undefined) return { path, reason: `a circular reference to ${seenAt} (JSON cannot store cycles)` };
  ancestors.set(value, path);
  const record = value as Record<string, unknown>;
  const isArray = Array.isArray(value);
  const keys = isArray ? Array.from({ length: (value as unknown[]).length }, (_, i) => String(i)) : Object.keys(value);
  for (const k of keys) {
    const problem = findProblem(record, k, isArray ? `${path}[${k}]` : childPath(path, k), isArray, ancestors);
    if (problem) return problem;
  }
  ancestors.delete(value);
  return undefined;
}

/**
 * Encodes a value as JSON for storage. `undefined` is stored as an empty string, and an object
 * property that is `undefined` is left out (it reads back as `undefined`). A `Date` is stored as
 * its ISO string and reads back as that string, not as a Date.
 *
 * Throws `OutputSerializationError`, naming the path (e.g. `$.items[2]`), for anything JSON would
 * silently drop or change: NaN, ±Infinity, BigInts, functions, symbols, `undefined` in an array,
 * Maps, Sets, Weak collections, typed arrays, Buffers, ArrayBuffers, invalid Dates, RegExps,
 * Errors, Promises and cycles. Throws `PayloadTooLargeError` above `limit` bytes.
 */
export function encodeJson(value: unknown, what: string, limit: number): string {
  if (value === undefined) return '';
  let text: string | undefined;
  try {
    text = JSON.stringify(value, rejectNonJson);
  } catch (error) {
    const problem = findProblem({ '': value }, '', '$', false, new Map());
    if (problem) throw new OutputSerializationError(what, problem.path, problem.reason);
    throw new OutputSerializationError(what, '$', `not serializable (${error instanceof Error ? error.message : String(error)})`);
  }
  // Only a root whose toJSON() returns undefined gets here with no text.
  if (text === undefined) throw new OutputSerializationError(what, '$', 'a value with no JSON form (its toJSON() returned undefined)');
  // A UTF-16 code unit is at most 3 UTF-8 bytes, so short strings skip the exact count.
  if (text.length * 3 > limit) {
    const bytes = Buffer.byteLength(text);
    if (bytes > limit) throw new PayloadTooLargeError(what, bytes, limit);
  }
  // One comparison for a string: escaped only in the (odd) case it looks like an envelope.
  if (typeof value === 'string' && value.charCodeAt(0) === 1 && value.startsWith(ENVELOPE_MARK)) return JSON.stringify(PLAIN_MARK + text);
  return text;
}

/**
 * Encodes a workflow's input: like `encodeJson`, but a value JSON would change is the caller's
 * mistake, so it is an `InputValidationError` naming the path.
 */
export function encodeInput(workflow: string, input: unknown, what: string, limit: number): string {
  try {
    return encodeJson(input, what, limit);
  } catch (error) {
    if (error instanceof OutputSerializationError) throw new InputValidationError(workflow, [{ message: `${error.path} is ${error.reason}` }]);
    throw error;
  }
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

/** Stored elsewhere in the record (or never stored), so never among `fields`. */
const NOT_FIELDS = new Set(['name', 'message', 'stack', 'cause', 'issues']);

/** The own data fields of one of our errors, with Dates as ISO strings; undefined for any other error. */
function ownFields(err: Error): Record<string, unknown> | undefined {
  const info = errorClassNamed(err.name);
  if (!info || !(err instanceof info.cls)) return undefined;
  let fields: Record<string, unknown> | undefined;
  for (const key of Object.keys(err)) {
    if (NOT_FIELDS.has(key)) continue;
    const value = (err as unknown as Record<string, unknown>)[key];
    if (value === undefined) continue;
    fields ??= {};
    fields[key] = value instanceof Date ? (Number.isNaN(value.getTime()) ? null : value.toISOString()) : value;
  }
  return fields;
}

/** Encodes an error for storage; never throws. */
export function serializeError(error: unknown): string {
  const err = error instanceof Error ? error : new Error(typeof error === 'string' ? error : safeJson(error));
  const out: StoredError = { name: err.name, message: err.message, stack: err.stack };
  const issues = (err as { issues?: unknown }).issues;
  if (issues !== undefined) out.issues = issues;
  try {
    const fields = ownFields(err);
    if (fields) out.fields = fields;
    return JSON.stringify(out);
  } catch {
    // A field or issue JSON cannot store (a cycle, a BigInt): keep what identifies the error.
    try {
      return JSON.stringify({ name: err.name, message: err.message, stack: err.stack });
    } catch {
      return JSON.stringify({ name: 'Error', message: 'The error could not be stored.' });
    }
  }
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

const ISO_DATE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$/;

function define(target: object, key: string, value: unknown, enumerable: boolean): void {
  Object.defineProperty(target, key, { value, writable: true, enumerable, configurable: true });
}

/**
 * Rebuilds a stored error. Our own error classes come back as instances of their class with their
 * fields, so `instanceof` and e.g. `error.timeoutMs` work on a run's error; any other error
 * becomes a `WorkflowRunError` that keeps the original name and message. Errors stored before
 * fields were stored come back without them.
 */
export function deserializeError(text: string | undefined): Error {
  let data: StoredError;
  try {
    data = JSON.parse(text ?? '');
    if (typeof data !== 'object' || data === null) throw new TypeError('not an object');
  } catch {
    return new WorkflowRunError('The run failed, but its stored error could not be read.', 'Error');
  }
  const name = typeof data.name === 'string' ? data.name : 'Error';
  const message = typeof data.message === 'string' ? data.message : '';
  const info = errorClassNamed(name);
  // Object.create skips the constructor: its message would be rebuilt from the fields, and
  // RetryAfterError's would re-check a delay that was valid when it was thrown.
  const error: RedflowError = info ? Object.create(info.cls.prototype) : new WorkflowRunError(message, name);
  if (info && data.fields && typeof data.fields === 'object') {
    for (const [key, stored] of Object.entries(data.fields)) {
      if (NOT_FIELDS.has(key)) continue;
      const value = info?.dateFields?.includes(key) && typeof stored === 'string' && ISO_DATE.test(stored) ? new Date(stored) : stored;
      define(error, key, value, true);
    }
  }
  if (error instanceof WorkflowRunError && typeof (error as { originalName?: unknown }).originalName !== 'string') define(error, 'originalName', name, true);
  define(error, 'message', message, false);
  define(error, 'name', name, false);
  if (data.stack) define(error, 'stack', data.stack, false);
  if (data.issues !== undefined) (error as { issues?: unknown }).issues = data.issues;
  return error;
}
