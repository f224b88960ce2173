/**
 * Checks of option values and option objects, run before anything reaches Redis. Pure: no I/O and
 * no Nest imports, so the engine and the Nest layer share them. Every failure is a
 * `ConfigurationError` whose one sentence names the option, the value given and what is allowed.
 */
import { ConfigurationError } from '../errors';
import { MAX_DURATION_MS, MAX_TIMER_MS, parseDurationMs } from './duration-format';
import { nearestName } from './nearest-name';
import {
  BATCH_KEYS,
  CANCEL_ON_KEYS,
  CONCURRENCY_KEYS,
  CRON_TRIGGER_KEYS,
  DEBOUNCE_KEYS,
  EVENT_TRIGGER_KEYS,
  LIMIT_KEYS,
  RETRY_POLICY_KEYS,
  STEP_RETRY_KEYS,
  WORKFLOW_OPTION_KEYS,
} from './option-keys';
import type { StepRetryPolicy } from './step-types';

export { MAX_DURATION_MS, MAX_TIMER_MS };
export * from './option-keys';

/** Longest idempotency key, in characters. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 512;

/** Longest queue name or key prefix, in characters. */
export const MAX_RESOURCE_NAME_LENGTH = 128;

/** Longest user-chosen name (step, mutex, debounce or throttle key, event), in characters, unless a check sets its own. */
export const MAX_USER_NAME_LENGTH = 512;

/**
 * A run's `timeout` (of the workflow, or of one run): a duration > 0 and at most 10 years, in ms.
 * `what` names where it was given, e.g. `timeout of workflow "checkout"`.
 */
export function checkRunTimeout(value: unknown, what: string): number {
  return checkDuration(value, what);
}

/** A step's `heartbeatTimeout`: a duration > 0 that a Node.js timer can wait (at most 24 days), in ms. */
export function checkHeartbeatTimeout(value: unknown, what: string): number {
  return checkDuration(value, what, { timer: true });
}

/** A step retry policy with its defaults, checked. */
export interface CheckedStepRetry {
  maxAttempts: number;
  backoff: 'fixed' | 'linear' | 'exponential';
  delayMs: number;
  maxDelayMs: number;
  jitter: number;
}

/** The retries of a step that sets none, in a workflow and a worker that set none: three tries, 1 s then 2 s apart. */
export const DEFAULT_STEP_RETRIES: Readonly<StepRetryPolicy> = { maxAttempts: 3 };

/** Checks a step's `retries` option; `ConfigurationError` naming the bad key and value. */
export function checkStepRetry(policy: unknown, what: string): CheckedStepRetry {
  assertKnownKeys(what, policy, STEP_RETRY_KEYS);
  const p = (policy ?? {}) as StepRetryPolicy;
  const maxAttempts = checkInteger(p.maxAttempts ?? 3, `${what} maxAttempts`, 1, 1_000);
  const backoff = p.backoff ?? 'exponential';
  if (!['fixed', 'linear', 'exponential'].includes(backoff)) {
    throw new ConfigurationError(`${what} backoff must be 'fixed', 'linear' or 'exponential', got ${describeValue(backoff)}.`);
  }
  const delayMs = p.delay === undefined ? 1_000 : checkDuration(p.delay, `${what} delay`, { allowZero: true });
  const maxDelayMs = p.maxDelay === undefined ? Math.max(delayMs, 300_000) : checkDuration(p.maxDelay, `${what} maxDelay`, { allowZero: true });
  if (maxDelayMs < delayMs) throw new ConfigurationError(`${what} maxDelay (${maxDelayMs} ms) must not be shorter than delay (${delayMs} ms).`);
  const jitter = p.jitter ?? 0;
  if (typeof jitter !== 'number' || !(jitter >= 0 && jitter <= 1))
    throw new ConfigurationError(`${what} jitter must be a number from 0 to 1, got ${describeValue(jitter)}.`);
  return { maxAttempts, backoff, delayMs, maxDelayMs, jitter };
}

/**
 * A short, printable description of any value for an error message: `NaN`, `"5x"`, `an array`,
 * and for long strings their start and length, so a 1 MiB value never ends up in a log line.
 */
export function describeValue(value: unknown): string {
  if (typeof value === 'string') {
    return value.length > 64 ? `${JSON.stringify(value.slice(0, 32))}… (a string of ${value.length} characters)` : JSON.stringify(value);
  }
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'function') return 'a function';
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? 'an invalid Date' : value.toISOString();
  if (Array.isArray(value)) return 'an array';
  if (value !== null && typeof value === 'object') return 'an object';
  return String(value);
}

/** True for option objects: object literals and class instances, not arrays, Dates, Maps, functions or null. */
function isOptionObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && Object.prototype.toString.call(value) === '[object Object]';
}

/**
 * Throws `ConfigurationError` unless `value` is undefined or an options object whose own keys are
 * all in `known`. An unknown key is named with the nearest known one ("Did you mean ...?") and the
 * full list, so a typo fails loudly instead of being silently ignored. `hints` gives a sentence to
 * show instead of the suggestion for keys that are known elsewhere (e.g. "Use @Cron instead.").
 */
export function assertKnownKeys(what: string, value: unknown, known: readonly string[], hints: Readonly<Record<string, string>> = {}): void {
  if (value === undefined) return;
  if (!isOptionObject(value)) throw new ConfigurationError(`${what} must be an object, got ${describeValue(value)}.`);
  for (const key of Object.keys(value)) {
    if (known.includes(key)) continue;
    // A deprecated name is accepted, but never offered: messages name the current options only.
    const current = known.filter((k) => !DEPRECATED_DURATION_NAMES.has(k) || !known.includes(DEPRECATED_DURATION_NAMES.get(k)!));
    const hint = Object.prototype.hasOwnProperty.call(hints, key) ? hints[key] : undefined;
    const near = hint === undefined ? nearestName(key, known) : undefined;
    const nearest = near !== undefined && !current.includes(near) ? DEPRECATED_DURATION_NAMES.get(near) : near;
    const advice = hint !== undefined ? ` ${hint}` : nearest !== undefined ? ` Did you mean "${nearest}"?` : '';
    throw new ConfigurationError(`Unknown option ${JSON.stringify(key)} in ${what}.${advice} Known options: ${current.join(', ')}.`);
  }
}

/**
 * Duration options renamed to one pattern (no unit in the name, a `Duration` value), by their
 * deprecated older name: the old names are still accepted for one minor version.
 */
export const DEPRECATED_DURATION_NAMES: ReadonlyMap<string, string> = new Map([
  ['timeoutMs', 'timeout'],
  ['idempotencyTtl', 'idempotencyWindow'],
  ['leaseMs', 'leaseDuration'],
  ['heartbeatMs', 'heartbeatInterval'],
  ['reaperIntervalMs', 'reaperInterval'],
  ['blockTimeoutMs', 'blockTimeout'],
  ['cleanupIntervalMs', 'cleanupInterval'],
  ['retentionDays', 'retention'],
  ['commandTimeoutMs', 'commandTimeout'],
  ['shutdownTimeoutMs', 'shutdownTimeout'],
  ['blockMs', 'blockTimeout'],
  ['maxOldestQueuedAgeMs', 'maxOldestQueuedAge'],
]);

/**
 * Checks the keys of workflow options and of their nested option objects (`retries`, `debounce`,
 * `throttle`, `rateLimit`, each `cron` and `event` item). `known` is the top-level list:
 * `WORKFLOW_OPTION_KEYS` for `defineWorkflow`, a variant of it for `@Workflow`.
 */
export function assertWorkflowOptionKeys(
  what: string,
  options: unknown,
  known: readonly string[] = WORKFLOW_OPTION_KEYS,
  hints: Readonly<Record<string, string>> = {},
): void {
  assertKnownKeys(what, options, known, hints);
  if (options === undefined) return;
  const o = options as Record<string, unknown>;
  assertKnownKeys(`retries of ${what}`, o.retries, RETRY_POLICY_KEYS);
  assertKnownKeys(`debounce of ${what}`, o.debounce, DEBOUNCE_KEYS);
  assertKnownKeys(`throttle of ${what}`, o.throttle, LIMIT_KEYS);
  assertKnownKeys(`rateLimit of ${what}`, o.rateLimit, LIMIT_KEYS);
  assertKnownKeys(`concurrency of ${what}`, o.concurrency, CONCURRENCY_KEYS);
  assertKnownKeys(`batch of ${what}`, o.batch, BATCH_KEYS);
  for (const [option, keys] of [
    ['cron', CRON_TRIGGER_KEYS],
    ['event', EVENT_TRIGGER_KEYS],
    ['cancelOn', CANCEL_ON_KEYS],
  ] as const) {
    const list = o[option];
    if (list === undefined) continue;
    if (!Array.isArray(list)) throw new ConfigurationError(`${option} of ${what} must be an array, got ${describeValue(list)}.`);
    list.forEach((item, i) => assertKnownKeys(`${option}[${i}] of ${what}`, item, keys));
  }
}

/**
 * A duration in whole milliseconds (rounded up, so a positive duration never becomes 0): a number
 * of ms, or a string like "500ms", "5s", "1.5m", "2h", "1d" (the syntax of `toMs`). It must be
 * > 0 (>= 0 with `allowZero`) and at most `MAX_DURATION_MS`: a larger value is a unit mistake,
 * and would overflow the timers and Redis expiries it ends up in.
 */
export function checkDuration(value: unknown, what: string, opts: { allowZero?: boolean; timer?: boolean } = {}): number {
  const ms = parseDurationMs(value);
  const low = opts.allowZero ? ms >= 0 : ms > 0;
  const max = opts.timer ? MAX_TIMER_MS : MAX_DURATION_MS;
  if (!low || !(ms <= max)) {
    throw new ConfigurationError(
      `${what} must be a duration ${opts.allowZero ? '>= 0' : '> 0'} and at most ${opts.timer ? '24 days (the longest Node.js timer)' : '10 years'} (a number of ms or a string like "5s"), got ${describeValue(value)}.`,
    );
  }
  return Math.ceil(ms);
}

/** How a renamed duration option is read: see `renamedDuration`. */
export interface RenamedDurationSpec {
  /** The option's name: it takes a `Duration`. */
  name: string;
  /** Its deprecated older name, whose number counts `unitMs` ms (1 for `...Ms`, 1000 for seconds, a day for `...Days`). */
  deprecated: string;
  /** @default 1 */
  unitMs?: number;
  /** How an option is named in messages, e.g. (key) => `runtime.${key}`. */
  label: (key: string) => string;
  allowZero?: boolean;
  timer?: boolean;
}

/**
 * A duration option that replaced a name with a unit in it (`timeoutMs`, `retentionDays`, an
 * `idempotencyTtl` in seconds), in ms: the option's `Duration`, else the deprecated name's number
 * in its unit; undefined when neither is given. `ConfigurationError` when both are given, or for a
 * bad value, naming the option as it was written.
 */
export function renamedDuration(options: object | undefined, spec: RenamedDurationSpec): number | undefined {
  const o = (options ?? {}) as Record<string, unknown>;
  const { name, deprecated, unitMs = 1, label } = spec;
  const value = o[name];
  const old = o[deprecated];
  const limits = { allowZero: spec.allowZero, timer: spec.timer };
  if (value !== undefined && old !== undefined) {
    throw new ConfigurationError(
      `${label(name)} and ${label(deprecated)} are the same option: keep ${label(name)} (a duration such as '30s'), and drop ${label(deprecated)}, its deprecated older name.`,
    );
  }
  if (value !== undefined) return checkDuration(value, label(name), limits);
  if (old === undefined) return undefined;
  if (unitMs === 1) return checkDuration(old, label(deprecated), limits);
  if (typeof old !== 'number') {
    throw new ConfigurationError(
      `${label(deprecated)} must be a number, got ${describeValue(old)}; or use ${label(name)}, which takes a duration such as '7d'.`,
    );
  }
  return checkDuration(old * unitMs, label(deprecated), limits);
}

/**
 * A point in time in epoch ms (rounded up): a valid Date or a finite number of epoch ms, at most
 * 10 years after `now`. A time in the past is allowed and means now.
 */
export function checkTimestamp(value: unknown, what: string, now: number = Date.now()): number {
  const ms = value instanceof Date ? value.getTime() : typeof value === 'number' ? value : NaN;
  if (!Number.isFinite(ms) || ms > now + MAX_DURATION_MS) {
    throw new ConfigurationError(
      `${what} must be a valid Date or epoch milliseconds at most 10 years from now (a past time means now), got ${describeValue(value)}.`,
    );
  }
  return Math.ceil(ms);
}

/** An idempotency key: a string of 1 to `MAX_IDEMPOTENCY_KEY_LENGTH` characters. */
export function checkIdempotencyKey(value: unknown, what: string): string {
  if (value === '') {
    throw new ConfigurationError(
      `${what} is an empty string: an empty idempotency key would be ignored and every call would start a new run; pass a key of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters or omit the option.`,
    );
  }
  if (typeof value !== 'string' || value.length > MAX_IDEMPOTENCY_KEY_LENGTH) {
    throw new ConfigurationError(
      `${what} must be a string of 1 to ${MAX_IDEMPOTENCY_KEY_LENGTH} characters, got ${describeValue(value)}; hash a longer key (e.g. SHA-256) first.`,
    );
  }
  return value;
}

/** Index of the first control character (C0, DEL or C1) in `s`, or -1. */
export function controlCharIndex(s: string): number {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) return i;
  }
  return -1;
}

/**
 * A queue name or key prefix, which becomes part of every Redis key: a non-empty printable string
 * of at most `MAX_RESOURCE_NAME_LENGTH` characters with no whitespace, no `{`/`}` (they would change
 * the Redis Cluster hash tag that keeps a prefix's keys in one slot) and no `*` (a key pattern,
 * so scans for one prefix would match others).
 */
export function checkResourceName(value: unknown, what: string): string {
  const got = describeValue(value);
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_RESOURCE_NAME_LENGTH) {
    throw new ConfigurationError(`${what} must be a name of 1 to ${MAX_RESOURCE_NAME_LENGTH} characters, got ${got}.`);
  }
  if (/\s/.test(value)) {
    throw new ConfigurationError(`${what} must not contain whitespace, got ${got}: it is part of every Redis key; use "-", "_", "." or ":" instead.`);
  }
  if (controlCharIndex(value) >= 0) {
    throw new ConfigurationError(`${what} must be printable, got ${got} with a control character: it is part of every Redis key.`);
  }
  if (/[{}]/.test(value)) {
    throw new ConfigurationError(
      `${what} must not contain "{" or "}", got ${got}: braces would change the Redis Cluster hash tag that keeps its keys in one slot.`,
    );
  }
  if (value.includes('*')) {
    throw new ConfigurationError(`${what} must not contain "*", got ${got}: "*" is a Redis key pattern, so key scans would match other names.`);
  }
  return value;
}

/** An integer from `min` to `max` (inclusive). */
export function checkInteger(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    const range = max >= Number.MAX_SAFE_INTEGER ? `>= ${min}` : `from ${min} to ${max}`;
    throw new ConfigurationError(`${what} must be an integer ${range}, got ${describeValue(value)}.`);
  }
  return value;
}

/** Highest `priority` (and minus the lowest). */
export const MAX_PRIORITY = 1000;

/** A run priority: an integer from -1000 to 1000. */
export function checkPriority(value: unknown, what: string): number {
  return checkInteger(value, what, -MAX_PRIORITY, MAX_PRIORITY);
}

/** A count: an integer from 1 to `max` (by default any safe integer). */
export function checkPositiveCount(value: unknown, what: string, max: number = Number.MAX_SAFE_INTEGER): number {
  return checkInteger(value, what, 1, max);
}

/**
 * A user-chosen name (step name, mutex, debounce or throttle key, event name): a non-empty string
 * of at most `max` characters (default `MAX_USER_NAME_LENGTH`), with no control characters such as
 * a newline, and none of the characters of `forbid`; `reason` says why those are reserved.
 */
export function checkUserName(value: unknown, what: string, opts: { max?: number; forbid?: string; reason?: string } = {}): string {
  const max = opts.max ?? MAX_USER_NAME_LENGTH;
  const got = describeValue(value);
  if (typeof value !== 'string' || value.length === 0 || value.length > max) {
    throw new ConfigurationError(`${what} must be a non-empty string of at most ${max} characters, got ${got}.`);
  }
  if (controlCharIndex(value) >= 0) {
    throw new ConfigurationError(`${what} must not contain control characters such as a newline or tab, got ${got}.`);
  }
  const forbidden = [...(opts.forbid ?? '')].find((c) => value.includes(c));
  if (forbidden !== undefined) {
    const list = [...(opts.forbid ?? '')].map((c) => JSON.stringify(c)).join(' or ');
    throw new ConfigurationError(`${what} must not contain ${list}, got ${got}${opts.reason ? `: ${opts.reason}` : ''}.`);
  }
  return value;
}

/** Largest workflow version. */
export const MAX_WORKFLOW_VERSION = 1_000_000;

/** A workflow version: a positive integer (`version` of a definition, a run option or a filter). */
export function checkWorkflowVersion(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_WORKFLOW_VERSION) {
    throw new ConfigurationError(
      `${what} must be a positive integer (1, 2, 3, ...), got ${describeValue(value)}. Raise it by one for each deploy that changes the order of the workflow's steps.`,
    );
  }
  return value;
}

/**
 * The queue a run of `version` waits in: version 1 uses the workflow's queue itself (the keys of
 * runs started before versions existed), version N > 1 the queue `<queue>@v<N>`. Queue names
 * cannot contain "@" (checked with the definition), so the two never meet.
 */
export function versionQueue(queue: string, version: number): string {
  return version === 1 ? queue : `${queue}@v${version}`;
}

/** The queue and version of a run's stored `queue` field (see `versionQueue`). */
export function parseVersionQueue(stored: string): { queue: string; version: number } {
  const match = /^(.*)@v(\d+)$/.exec(stored);
  return match ? { queue: match[1], version: Number(match[2]) } : { queue: stored, version: 1 };
}
