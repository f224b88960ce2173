import type { StepState } from '../definition/run-types';
import { CorruptRunDataError } from '../errors';
import { PLAIN_PAYLOADS, type Payloads } from './payloads';
import { decodeJson } from './serialization';

/**
 * The step record codec on the TypeScript side: every step record the engine writes or reads goes
 * through this file: the `encode...` functions write them and `decodeStepRecord` alone reads them
 * (its Lua twin is `scripts/includes/step-record.lua`). A step's record is the
 * run-hash field `s:<step name>`, a JSON array short enough that small runs keep Redis's compact
 * hash encoding. By its first element:
 * - `[1, seq, attempt, finishedAt, durationMs, output?]`: succeeded (for child runs, the child's output)
 * - `[0, seq, attempt, finishedAt, durationMs, error]`: threw; runs again on the next attempt
 * - `[2, seq, attempt, wakeAt, began?]`: a `waitFor`, done once `wakeAt` has passed
 * - `[3, seq, attempt, childRunId, deadline, began?]`: waiting for a child run (deadline 0 = none)
 * - `[4, seq, attempt, signalName, deadline, began?]`: waiting for a signal (deadline 0 = none)
 * - `[5, seq, attempt, eventName, deadline, match, began?]`: waiting for an event (deadline 0 = none)
 * - `[6, seq, attempt, deadline, began?]`: a `waitForAny` no branch has won yet (deadline: its earliest
 *   timer, 0 = none); its branches are in `r:<step name>` (RACE_FIELD_PREFIX). Once a branch wins,
 *   the record is `[1, ..., { key, value }]` (or `[0, ..., error]` for a child that failed).
 *
 * `began` (last, optional: records written before it was kept have none) is when the wait began
 * (epoch ms, workflow clock, as every time a script writes). The script that ends a wait writes
 * `[1 | 0, seq, attempt, end, end - began, output | error, via]`, so a finished wait's `startedAt`
 * is when it began and `finishedAt` when it ended (a record without `began` reads as taking 0 ms);
 * a sleep that is over reads `startedAt` = `began`, `finishedAt` = `wakeAt`. `via` names what the
 * wait waited for: `["s", signal]`, `["e", event]` or `["c", childRunId]`, with a third element `0`
 * when the output was undefined (the output is then stored as `null`). Records written before `via`
 * was kept have none.
 */

/** Prefix of step record fields in the run hash. */
export const STEP_FIELD_PREFIX = 's:';

/** Run-hash field of the latest `step.setProgress` value (JSON). */
export const PROGRESS_FIELD = 'progress';

/** Prefix of run-hash fields holding `ctx.setEvent` values: `v:<key>` (JSON). */
export const VALUE_FIELD_PREFIX = 'v:';

/**
 * Prefix of run-hash fields holding the journaled values of `step.now()`, `step.random()` and
 * `step.uuid()`: `d:<kind>`, `d:<kind>#2`, ... in call order (JSON). Not steps: `getRunSteps`, the
 * event stream and hooks leave them out.
 */
export const DETERMINISTIC_FIELD_PREFIX = 'd:';

/**
 * Prefix of run-hash fields holding the answer of `step.patched(id)` for the run: `p:<id>`, "1"
 * (the run reached the patch point running the patched code) or "0" (it had passed that point
 * before the patch existed).
 */
export const PATCH_FIELD_PREFIX = 'p:';

/**
 * Prefix of the compensation record of a step that completed with a `compensate` function:
 * `c:<step name>`, written with the step's record. `"0"`: its compensation is due if the run
 * fails or is canceled with `{ compensate: true }`; `"x"`: a later `step.commit` made it final,
 * never compensated; a success record (`[1, seq, ...]`, as a step's): its compensation ran.
 */
export const COMPENSATION_FIELD_PREFIX = 'c:';

/** A compensation that is due (see COMPENSATION_FIELD_PREFIX). */
export const COMPENSATION_PENDING = '0';

/** A compensation that a `step.commit` made never due. */
export const COMPENSATION_COMMITTED = 'x';

/**
 * Prefix of the branches of a `step.waitForAny` race: `r:<step name>`, a JSON array of
 * `[key, 's', signalName]`, `[key, 't', dueAt]`, `[key, 'c', childRunId, 'cancel' | 'abandon']` and `[key, 'e', event, matchShape, matchHash]`,
 * in declaration order. It stays until the lease holder has unregistered the branches after a win
 * (`wait-any-2.lua`), so a replay that finds it next to a finished record ends the race first.
 */
export const RACE_FIELD_PREFIX = 'r:';

/** A branch of a stored race (see RACE_FIELD_PREFIX). */
export type RaceBranchRecord =
  | [key: string, kind: 's', signal: string]
  | [key: string, kind: 't', dueAt: number]
  | [key: string, kind: 'c', childRunId: string, onLose: 'cancel' | 'abandon']
  | [key: string, kind: 'e', event: string, matchShape: string, matchHash: string];

/** A race no branch has won yet, and its branches' JSON (the `r:` field). */
export function encodeRaceRecord(
  seq: number,
  attempt: number,
  deadline: number,
  branches: RaceBranchRecord[],
  began: number,
): { record: string; branches: string } {
  return { record: `[6,${seq},${attempt},${deadline},${began}]`, branches: JSON.stringify(branches) };
}

/** The run-hash fields a replay reads back: step, tries and compensation records, journaled values and patch answers. */
export function isJournalField(field: string): boolean {
  return (
    field.startsWith(STEP_FIELD_PREFIX) ||
    field.startsWith(TRIES_FIELD_PREFIX) ||
    field.startsWith(DETERMINISTIC_FIELD_PREFIX) ||
    field.startsWith(PATCH_FIELD_PREFIX) ||
    field.startsWith(COMPENSATION_FIELD_PREFIX) ||
    field.startsWith(RACE_FIELD_PREFIX)
  );
}

/**
 * Prefix of a step's tries record, `t:<step name>`, written each time the step's function throws,
 * and once more when it then succeeds: `[failures, runAttempt, failuresInRunAttempt, retryAt,
 * lastError, tries?]`. `failures` counts every failed try of the run; `failuresInRunAttempt` those
 * of run attempt `runAttempt` (the step's own retry budget is per run attempt); `retryAt` is when
 * its next try is due (0: no retry pending). `tries` (last, optional: records written before it
 * was kept have none) lists the step's last MAX_STORED_TRIES tries, oldest first, each
 * `[startedAt, finishedAt, runAttempt, error?]` (`error`: `{ name, message }` of a failed try; none
 * for the try that succeeded). A step that never threw has no tries record: the happy path writes
 * nothing of this.
 */
export const TRIES_FIELD_PREFIX = 't:';

/** How many tries a tries record keeps (the last ones): bounded, so a step retried for days stays small. */
export const MAX_STORED_TRIES = 20;

/** One try of a step, as its tries record keeps it (see TRIES_FIELD_PREFIX). */
export interface StepTry {
  startedAt: number;
  finishedAt: number;
  /** The run attempt the try ran in. */
  attempt: number;
  error?: { name: string; message: string };
}

/** A decoded tries record (see TRIES_FIELD_PREFIX). */
export interface StepTries {
  failures: number;
  runAttempt: number;
  failuresInRunAttempt: number;
  retryAt: number;
  lastError: unknown;
  /** Its last tries, oldest first; empty for a record written before tries were kept. */
  tries: StepTry[];
}

/** Encodes a tries record; `error` is the last failed try's serialized error (JSON text). Keeps the last MAX_STORED_TRIES tries. */
export function encodeTriesRecord(t: Omit<StepTries, 'lastError' | 'tries'>, error: string, tries: StepTry[]): string {
  const kept = tries.slice(-MAX_STORED_TRIES).map((x) => (x.error ? [x.startedAt, x.finishedAt, x.attempt, x.error] : [x.startedAt, x.finishedAt, x.attempt]));
  return `[${t.failures},${t.runAttempt},${t.failuresInRunAttempt},${t.retryAt},${error},${JSON.stringify(kept)}]`;
}

/** One stored try, checked; undefined when it is not one. */
function stepTry(x: unknown): StepTry | undefined {
  if (!Array.isArray(x) || x.length < 3 || !x.slice(0, 3).every(isNumber)) return undefined;
  const [startedAt, finishedAt, attempt, error] = x as [number, number, number, { name?: unknown; message?: unknown } | undefined];
  const t: StepTry = { startedAt, finishedAt, attempt };
  if (error && typeof error === 'object') t.error = { name: String(error.name), message: String(error.message) };
  return t;
}

/** Decodes a tries record; `CorruptRunDataError` when it is not one. */
export function parseTriesRecord(runId: string, field: string, text: string): StepTries {
  const r = decodeJson(text, runId, field) as unknown[];
  const corrupt = () => new CorruptRunDataError(runId, `field "${field}" is not a step tries record`);
  if (!Array.isArray(r) || r.length < 5 || r.length > 6 || !r.slice(0, 4).every(isNumber)) throw corrupt();
  const [failures, runAttempt, failuresInRunAttempt, retryAt, lastError, stored] = r as [number, number, number, number, unknown, unknown];
  if (stored !== undefined && !Array.isArray(stored)) throw corrupt();
  const tries = (stored ?? []).map(stepTry);
  if (tries.some((t) => t === undefined)) throw corrupt();
  return { failures, runAttempt, failuresInRunAttempt, retryAt, lastError, tries: tries as StepTry[] };
}

/** A succeeded step; `output` is its JSON text, or '' for `undefined` (kept out of the record). */
export function encodeSuccessRecord(seq: number, attempt: number, finishedAt: number, durationMs: number, output: string): string {
  const head = `[1,${seq},${attempt},${finishedAt},${durationMs}`;
  return output === '' ? `${head}]` : `${head},${output}]`;
}

/** A step that threw; `error` is the serialized error's JSON text. */
export function encodeFailureRecord(seq: number, attempt: number, finishedAt: number, durationMs: number, error: string): string {
  return `[0,${seq},${attempt},${finishedAt},${durationMs},${error}]`;
}

/** A `waitFor` step that wakes at `wakeAt` (epoch ms), begun at `began`. */
export function encodeSleepRecord(seq: number, attempt: number, wakeAt: number, began: number): string {
  return `[2,${seq},${attempt},${wakeAt},${began}]`;
}

/** What a finished wait waited for (the `via` of its record). */
export interface WaitVia {
  kind: 'signal' | 'event' | 'child';
  /** The signal's or the event's name, or the child run's id. */
  name: string;
}

const VIA_KINDS: Record<string, WaitVia['kind']> = { s: 'signal', e: 'event', c: 'child' };

/** The `via` of a finished wait's record and whether its output was undefined; undefined when `v` is not one. */
function decodeVia(v: unknown): { via: WaitVia; voidOutput: boolean } | undefined {
  if (!Array.isArray(v) || v.length < 2 || v.length > 3 || typeof v[1] !== 'string' || (v.length === 3 && v[2] !== 0)) return undefined;
  const kind = VIA_KINDS[v[0] as string];
  return kind ? { via: { kind, name: v[1] }, voidOutput: v.length === 3 } : undefined;
}

/** What every step record holds first: its order among the run's records and its run attempt. */
interface StoredStepBase {
  seq: number;
  attempt: number;
}

/**
 * A step record read back and checked: what replay and the public step state are built from.
 * `deadline` is 0 when the wait has none; `began` is when a wait began, undefined in a record
 * written before it was kept.
 */
export type StoredStep = StoredStepBase &
  (
    | { kind: 'succeeded'; finishedAt: number; durationMs: number; output: unknown; via?: WaitVia }
    | { kind: 'failed'; finishedAt: number; durationMs: number; error: unknown; via?: WaitVia }
    | { kind: 'sleeping'; wakeAt: number; began?: number }
    | { kind: 'child'; childRunId: string; deadline: number; began?: number }
    | { kind: 'signal'; signal: string; deadline: number; began?: number }
    | { kind: 'event'; event: string; deadline: number; match: Record<string, unknown>; began?: number }
    | { kind: 'race'; deadline: number; began?: number }
  );

const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

/**
 * A succeeded record's output, opened (payloads.ts). A won race's output is `{ key, value }`, its
 * value the winning branch's payload as the script moved it: opened too.
 */
function openOutput(payloads: Payloads, output: unknown, runId: string): unknown {
  const opened = payloads.open(output, { kind: 'step', runId });
  if (opened === output && typeof output === 'object' && output !== null && 'value' in output && 'key' in output && Object.keys(output).length === 2) {
    const value = (output as { value: unknown }).value;
    const openedValue = payloads.open(value, { kind: 'step', runId });
    if (openedValue !== value) return { key: (output as { key: unknown }).key, value: openedValue };
  }
  return opened;
}

/** `{ began }` when `v` (a wait record's last element) is a start time; `{}` when absent. */
function beganOf(v: unknown): { began?: number } {
  return isNumber(v) ? { began: v } : {};
}
/** A wait's deadline: a number, 0 for none. */
const isDeadline = (v: unknown): boolean => v === undefined || isNumber(v);

/**
 * Decodes a step record (`field` is its run-hash field, `s:<step name>`): the one reader of step
 * records in TypeScript. `CorruptRunDataError` naming the run, the field and the step when it is
 * not one.
 */
export function decodeStepRecord(runId: string, field: string, text: string, payloads: Payloads = PLAIN_PAYLOADS): StoredStep {
  const where = `field "${field}" (step "${field.slice(STEP_FIELD_PREFIX.length)}")`;
  let r: unknown[];
  try {
    r = JSON.parse(text) as unknown[];
  } catch {
    throw new CorruptRunDataError(runId, `${where} is not valid JSON`);
  }
  const corrupt = () => new CorruptRunDataError(runId, `${where} is not a step record`);
  if (!Array.isArray(r) || r.length < 4 || !isNumber(r[1]) || !isNumber(r[2])) throw corrupt();
  if (r[0] === 6) {
    if (r.length > 5 || !isNumber(r[3]) || (r.length === 5 && !isNumber(r[4]))) throw corrupt();
    return { seq: r[1], attempt: r[2], kind: 'race', deadline: r[3], ...beganOf(r[4]) };
  }
  const base = { seq: r[1], attempt: r[2] };
  switch (r[0]) {
    case 0:
    case 1: {
      if (r.length < 5 || r.length > 7 || !isNumber(r[3]) || !isNumber(r[4]) || (r[0] === 0 && r.length < 6)) throw corrupt();
      const ended = r.length === 7 ? decodeVia(r[6]) : undefined;
      if (r.length === 7 && !ended) throw corrupt();
      const via = ended ? { via: ended.via } : {};
      return r[0] === 1
        ? { ...base, kind: 'succeeded', finishedAt: r[3], durationMs: r[4], output: ended?.voidOutput ? undefined : openOutput(payloads, r[5], runId), ...via }
        : { ...base, kind: 'failed', finishedAt: r[3], durationMs: r[4], error: r[5], ...via };
    }
    case 2:
      if (!isNumber(r[3]) || !isDeadline(r[4])) throw corrupt();
      return { ...base, kind: 'sleeping', wakeAt: r[3], ...beganOf(r[4]) };
    case 3:
    case 4:
    case 5: {
      if (typeof r[3] !== 'string' || !isDeadline(r[4])) throw corrupt();
      const deadline = (r[4] as number | undefined) ?? 0;
      const began = r[0] === 5 ? r[6] : r[5];
      if (!isDeadline(began)) throw corrupt();
      if (r[0] === 3) return { ...base, kind: 'child', childRunId: r[3], deadline, ...beganOf(began) };
      if (r[0] === 4) return { ...base, kind: 'signal', signal: r[3], deadline, ...beganOf(began) };
      const match = payloads.open(r[5] ?? {}, { kind: 'match', runId });
      if (typeof match !== 'object' || match === null || Array.isArray(match)) throw corrupt();
      return { ...base, kind: 'event', event: r[3], deadline, match: match as Record<string, unknown>, ...beganOf(began) };
    }
    default:
      throw corrupt();
  }
}

/**
 * Reads a stored step record into its public form; with its tries record, when the step ever
 * failed, it also tells how many times the step ran, its last error and its last tries.
 */
export function parseStepRecord(
  runId: string,
  field: string,
  text: string,
  triesText?: string,
  now: number = Date.now(),
  payloads: Payloads = PLAIN_PAYLOADS,
): StepState {
  const state = stepState(field.slice(STEP_FIELD_PREFIX.length), decodeStepRecord(runId, field, text, payloads), now);
  if (state.status === 'waiting' || state.wakeAt !== undefined) return state;
  if (triesText === undefined) return { ...state, attempts: 1 };
  const tries = parseTriesRecord(runId, TRIES_FIELD_PREFIX + state.name, triesText);
  const retry = state.status === 'failed' && tries.retryAt > 0 ? { retryAt: tries.retryAt } : {};
  const list = tries.tries.length ? { tries: tries.tries } : {};
  return {
    ...state,
    attempts: tries.failures + (state.status === 'succeeded' ? 1 : 0),
    lastError: tries.lastError as StepState['lastError'],
    ...retry,
    ...list,
  };
}

/**
 * A step of a run that ended at `finishedAt`: one that still waited then (a signal, an event, a
 * child, a race, or a sleep not over by then) never completed, and has no pending wait.
 */
export function stepOfEndedRun(step: StepState, finishedAt: number): StepState {
  // Only a sleep's state has `wakeAt` once it succeeded.
  const sleptThrough = step.status === 'succeeded' && step.wakeAt !== undefined && step.wakeAt > finishedAt;
  if (step.status !== 'waiting' && !sleptThrough) return step;
  const { name, seq, attempt, childRunId } = step;
  return { name, seq, attempt, status: 'interrupted', ...(childRunId ? { childRunId } : {}) };
}

function stepState(name: string, r: StoredStep, now: number): StepState {
  const base = { name, seq: r.seq, attempt: r.attempt };
  // A wait started when it began (records written before that was kept: unknown).
  const began = r.kind !== 'succeeded' && r.kind !== 'failed' && r.began !== undefined ? { startedAt: r.began } : {};
  switch (r.kind) {
    case 'sleeping':
      if (r.wakeAt > now) return { ...base, status: 'waiting', wakeAt: r.wakeAt, ...began };
      // A sleep until a time already past when it began ended at once.
      return { ...base, status: 'succeeded', wakeAt: r.wakeAt, ...began, ...(r.began !== undefined ? { finishedAt: Math.max(r.wakeAt, r.began) } : {}) };
    case 'child':
      return { ...base, status: 'waiting', childRunId: r.childRunId, ...began };
    case 'signal':
      return { ...base, status: 'waiting', signal: r.signal, ...(r.deadline ? { wakeAt: r.deadline } : {}), ...began };
    case 'event':
      return { ...base, status: 'waiting', event: r.event, match: r.match, ...(r.deadline ? { wakeAt: r.deadline } : {}), ...began };
    case 'race':
      return { ...base, status: 'waiting', ...(r.deadline ? { wakeAt: r.deadline } : {}), ...began };
    case 'succeeded':
      return {
        ...base,
        status: 'succeeded',
        finishedAt: r.finishedAt,
        startedAt: r.finishedAt - r.durationMs,
        ...(r.output !== undefined ? { output: r.output } : {}),
        ...waitedFor(r.via),
      };
    case 'failed':
      return {
        ...base,
        status: 'failed',
        finishedAt: r.finishedAt,
        startedAt: r.finishedAt - r.durationMs,
        error: r.error as { name: string; message: string; stack?: string },
        ...waitedFor(r.via),
      };
  }
}

/** The fields of a finished wait's state naming what it waited for: its signal, event or child run. */
function waitedFor(via: WaitVia | undefined): Pick<StepState, 'signal' | 'event' | 'childRunId'> {
  if (!via) return {};
  if (via.kind === 'signal') return { signal: via.name };
  if (via.kind === 'event') return { event: via.name };
  return { childRunId: via.name };
}
