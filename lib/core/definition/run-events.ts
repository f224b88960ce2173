import { ConfigurationError } from '../errors';
import type { Duration } from './duration-format';
import { assertKnownKeys, checkInteger, optionKeys, renamedDuration } from './option-checks';

/** What happened to a run, as the event stream (`client.events()`) tells it. */
export type RunEventType =
  | 'run.created'
  | 'run.started'
  | 'step.completed'
  | 'step.failed'
  | 'retry.scheduled'
  | 'run.waiting'
  | 'run.signaled'
  | 'run.resumed'
  | 'run.compensating'
  | 'run.completed'
  | 'run.failed'
  | 'run.canceled'
  | 'run.compensation_failed'
  | 'run.terminated';

/** Every `RunEventType`, in the order a run usually meets them. */
export const RUN_EVENT_TYPES: readonly RunEventType[] = [
  'run.created',
  'run.started',
  'step.completed',
  'step.failed',
  'retry.scheduled',
  'run.waiting',
  'run.signaled',
  'run.resumed',
  'run.compensating',
  'run.completed',
  'run.failed',
  'run.canceled',
  'run.compensation_failed',
  'run.terminated',
];

/** What a waiting run waits for (`run.waiting`). */
export type RunWaitingFor = 'sleep' | 'child' | 'signal' | 'event' | 'race' | 'retry';

/**
 * One entry of the event stream. Entries stay small: never a run's input, output or a step's
 * output; for failures only the error message.
 */
export interface RunEvent {
  /**
   * The stream entry id (`<ms>-<seq>`). The events written by one script (a finish with the
   * steps it stores, say) share one entry and its id: `from: id` resumes after the whole entry.
   */
  id: string;
  /**
   * This event's own place in the stream, `<entry id>:<index in the entry>`: ordered, one per
   * event. Store it with the work an event caused and resume with `from: position`: the next
   * reader starts with the event after it, in the same entry or the next.
   */
  position: string;
  type: RunEventType;
  runId: string;
  workflow: string;
  /** When it happened (ms): the time of the script that wrote it (a step's: when the step ended). */
  at: number;
  /** The step (`step.completed`, `step.failed`, and `retry.scheduled` of a step retry). */
  step?: string;
  /** The run's attempt (`run.started`, `retry.scheduled`) or the step's (`step.*`). */
  attempt?: number;
  /** The error message (`step.failed`, `retry.scheduled`, `run.compensating`, `run.failed`, `run.canceled`, `run.compensation_failed`, `run.terminated`). */
  error?: string;
  /** When the next attempt is due (`retry.scheduled`), or the wake-up time of a timed wait (`run.waiting`). */
  retryAt?: number;
  /** What the run waits for (`run.waiting`). */
  waitingFor?: RunWaitingFor;
  /** The signal's name (`run.signaled` by `client.signal`). */
  signal?: string;
  /** The event's name (`run.signaled` by an event that a `step.waitForEvent` waited for). */
  event?: string;
}

/** The event stream written by the scripts of a client (and its workers). */
export interface EventStreamOptions {
  /**
   * The stream keeps about the last `maxLen` events of the prefix (Redis trims with `MAXLEN ~`,
   * so a little more). Use the same value in every process of a prefix. @default 100000
   */
  maxLen?: number;
}

/** Default of `events.maxLen`. */
export const DEFAULT_EVENTS_MAX_LEN = 100_000;

const EVENT_STREAM_OPTION_KEYS = optionKeys<EventStreamOptions>()(['maxLen']);

/**
 * The MAXLEN the scripts trim the stream to, from the client option `events`: 0 when it is
 * `false` (nothing is written).
 */
export function checkEventStreamOption(value: unknown, what = 'createClient option events'): number {
  if (value === false) return 0;
  if (value === undefined) return DEFAULT_EVENTS_MAX_LEN;
  if (value === true)
    throw new ConfigurationError(`${what} must be false or an object such as { maxLen: 100000 }, got true. Leave it out to keep the default stream.`);
  assertKnownKeys(what, value, EVENT_STREAM_OPTION_KEYS);
  const maxLen = (value as EventStreamOptions).maxLen;
  if (maxLen === undefined) return DEFAULT_EVENTS_MAX_LEN;
  return checkInteger(maxLen, `${what}.maxLen (pass events: false to turn the stream off)`, 1, 1_000_000_000);
}

/** Options of `client.events()`. */
export interface RunEventsOptions {
  /** Only events of this workflow. */
  workflow?: string;
  /** Only events of this run. */
  runId?: string;
  /** Only events of these types. */
  types?: readonly RunEventType[];
  /**
   * Where to start: `'now'` (only events written after `events()` was called), the `position`
   * of the last event a previous reader handled (the events after it), a stream entry id (the
   * events of the entries after it), or `'0'` for everything still in the stream. @default 'now'
   */
  from?: 'now' | string;
  /** Most events held in memory; the reader stops reading Redis while it is full. @default 1000 */
  bufferSize?: number;
  /** How long one XREAD blocks before the reader checks again whether it was closed (at most a minute). @default '1s' */
  blockTimeout?: Duration;
  /** @deprecated Use `blockTimeout` (a duration such as `'1s'`, or ms); it goes in the next minor version. */
  blockMs?: number;
}

/** Keys of `RunEventsOptions`. */
export const RUN_EVENTS_OPTION_KEYS = optionKeys<RunEventsOptions>()(['workflow', 'runId', 'types', 'from', 'bufferSize', 'blockTimeout', 'blockMs']);

/** Default of `bufferSize`. */
export const DEFAULT_EVENTS_BUFFER_SIZE = 1000;

const STREAM_ID = /^\d+(-\d+)?$/;
/** An event's `position`: its entry id and its index in the entry. */
const POSITION = /^(\d+-\d+):(\d+)$/;

/** Options of `client.events()` checked, with defaults filled in. */
export function checkRunEventsOptions(
  options: RunEventsOptions | undefined,
): Required<Pick<RunEventsOptions, 'from' | 'bufferSize' | 'blockMs'>> &
  Pick<RunEventsOptions, 'workflow' | 'runId'> & { types: ReadonlySet<RunEventType> | undefined } {
  assertKnownKeys('client.events() options', options, RUN_EVENTS_OPTION_KEYS);
  const o = options ?? {};
  for (const key of ['workflow', 'runId'] as const) {
    if (o[key] !== undefined && (typeof o[key] !== 'string' || o[key] === '')) {
      throw new ConfigurationError(`client.events() option ${key} must be a non-empty string, got ${JSON.stringify(o[key])}.`);
    }
  }
  let types: Set<RunEventType> | undefined;
  if (o.types !== undefined) {
    if (!Array.isArray(o.types) || o.types.length === 0)
      throw new ConfigurationError(`client.events() option types must be a non-empty array of event types (${RUN_EVENT_TYPES.join(', ')}).`);
    for (const type of o.types) {
      if (!RUN_EVENT_TYPES.includes(type))
        throw new ConfigurationError(
          `client.events() option types holds ${JSON.stringify(type)}, which is no event type. Known types: ${RUN_EVENT_TYPES.join(', ')}.`,
        );
    }
    types = new Set(o.types);
  }
  const from = o.from ?? 'now';
  if (typeof from !== 'string' || (from !== 'now' && !STREAM_ID.test(from) && !POSITION.test(from))) {
    throw new ConfigurationError(
      `client.events() option from must be 'now', an event's position such as "1700000000000-0:1", or a stream entry id such as "1700000000000-0", got ${JSON.stringify(from)}.`,
    );
  }
  return {
    workflow: o.workflow,
    runId: o.runId,
    types,
    from,
    bufferSize: checkInteger(o.bufferSize ?? DEFAULT_EVENTS_BUFFER_SIZE, 'client.events() option bufferSize', 1, 1_000_000),
    blockMs: blockTimeoutMs(o),
  };
}

/** The reader's `blockTimeout` (or deprecated `blockMs`) in ms: at most a minute, as XREAD BLOCK waits in one call. */
function blockTimeoutMs(o: RunEventsOptions): number {
  const label = (key: string) => `client.events() option ${key}`;
  const ms = renamedDuration(o, { name: 'blockTimeout', deprecated: 'blockMs', label, timer: true }) ?? 1_000;
  if (ms > 60_000) throw new ConfigurationError(`${label(o.blockTimeout === undefined ? 'blockMs' : 'blockTimeout')} must be at most a minute, got ${ms} ms.`);
  return ms;
}

/**
 * The events of one stream entry. A script writes all its events as one entry whose field/value
 * pairs repeat: each `type` field starts the next event. They share the entry's id.
 */
export function toRunEvents(id: string, flat: readonly string[]): RunEvent[] {
  const events: RunEvent[] = [];
  let f: Record<string, string> | undefined;
  for (let i = 0; i + 1 < flat.length; i += 2) {
    if (flat[i] === 'type' || f === undefined) {
      if (f) events.push(toRunEvent(id, events.length, f));
      f = {};
    }
    f[flat[i]] = flat[i + 1];
  }
  if (f) events.push(toRunEvent(id, events.length, f));
  return events;
}

/**
 * Where a reader starts for `from` (not 'now'): the entry id to read after, and, for an event's
 * position, the entry whose events up to that index were handled already.
 */
export function startOf(from: string): { after: string; skip?: { id: string; upTo: number } } {
  const position = POSITION.exec(from);
  if (!position) return { after: from };
  const [, id, index] = position;
  return { after: entryBefore(id), skip: { id, upTo: Number(index) } };
}

/** The greatest stream id before `<ms>-<seq>`, so that reading after it reads that entry again. */
function entryBefore(id: string): string {
  const [ms, seq] = id.split('-').map(BigInt);
  if (seq > 0n) return `${ms}-${seq - 1n}`;
  return ms > 0n ? `${ms - 1n}-18446744073709551615` : '0-0';
}

function toRunEvent(id: string, index: number, f: Record<string, string>): RunEvent {
  const event: RunEvent = { id, position: `${id}:${index}`, type: f.type as RunEventType, runId: f.runId, workflow: f.workflow, at: Number(f.at) };
  if (f.step !== undefined) event.step = f.step;
  if (f.attempt !== undefined) event.attempt = Number(f.attempt);
  if (f.error !== undefined) event.error = f.error;
  if (f.retryAt !== undefined) event.retryAt = Number(f.retryAt);
  if (f.waitingFor !== undefined) event.waitingFor = f.waitingFor as RunWaitingFor;
  if (f.signal !== undefined) event.signal = f.signal;
  if (f.event !== undefined) event.event = f.event;
  return event;
}
