import { CorruptRunDataError } from '../errors';
import type { StepState } from '../definition/types';
import { decodeJson } from './serialization';

/**
 * The step record codec on the TypeScript side: every step record the engine writes or reads goes
 * through this file (its Lua twin is `scripts/includes/step-record.lua`). A step's record is the
 * run-hash field `s:<step name>`, a JSON array short enough that small runs keep Redis's compact
 * hash encoding. By its first element:
 * - `[1, seq, attempt, finishedAt, durationMs, output?]`: succeeded (for child runs, the child's output)
 * - `[0, seq, attempt, finishedAt, durationMs, error]`: threw; runs again on the next attempt
 * - `[2, seq, attempt, wakeAt]`: a `waitFor`, done once `wakeAt` has passed
 * - `[3, seq, attempt, childRunId, deadline]`: waiting for a child run (deadline 0 = none)
 * - `[4, seq, attempt, signalName, deadline]`: waiting for a signal (deadline 0 = none)
 * - `[5, seq, attempt, eventName, deadline, match]`: waiting for an event (deadline 0 = none)
 */
export type StepRecord = [kind: 0 | 1 | 2 | 3 | 4 | 5, seq: number, attempt: number, a: unknown, b?: unknown, value?: unknown];

/** Prefix of step record fields in the run hash. */
export const STEP_FIELD_PREFIX = 's:';

/** Run-hash field of the latest `step.setProgress` value (JSON). */
export const PROGRESS_FIELD = 'progress';

/** Prefix of run-hash fields holding `ctx.setEvent` values: `v:<key>` (JSON). */
export const VALUE_FIELD_PREFIX = 'v:';

/**
 * Prefix of a step's tries record, `t:<step name>`, written each time the step's function throws:
 * `[failures, runAttempt, failuresInRunAttempt, retryAt, lastError]`. `failures` counts every
 * failed try of the run; `failuresInRunAttempt` those of run attempt `runAttempt` (the step's own
 * retry budget is per run attempt); `retryAt` is when its next try is due (0: no retry pending).
 */
export const TRIES_FIELD_PREFIX = 't:';

/** A decoded tries record (see TRIES_FIELD_PREFIX). */
export interface StepTries {
  failures: number;
  runAttempt: number;
  failuresInRunAttempt: number;
  retryAt: number;
  lastError: unknown;
}

/** Encodes a tries record; `error` is the serialized error's JSON text. */
export function encodeTriesRecord(t: Omit<StepTries, 'lastError'>, error: string): string {
  return `[${t.failures},${t.runAttempt},${t.failuresInRunAttempt},${t.retryAt},${error}]`;
}

/** Decodes a tries record; `CorruptRunDataError` when it is not one. */
export function parseTriesRecord(runId: string, field: string, text: string): StepTries {
  const r = decodeJson(text, runId, field) as unknown[];
  if (!Array.isArray(r) || r.length !== 5 || !r.slice(0, 4).every((n) => typeof n === 'number' && Number.isFinite(n))) {
    throw new CorruptRunDataError(runId, `field "${field}" is not a step tries record`);
  }
  const [failures, runAttempt, failuresInRunAttempt, retryAt, lastError] = r as [number, number, number, number, unknown];
  return { failures, runAttempt, failuresInRunAttempt, retryAt, lastError };
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

/** A `waitFor` step that wakes at `wakeAt` (epoch ms). */
export function encodeSleepRecord(seq: number, attempt: number, wakeAt: number): string {
  return `[2,${seq},${attempt},${wakeAt}]`;
}

/**
 * Reads a stored step record into its public form; with its tries record, when the step ever
 * failed, it also tells how many times the step ran and its last error.
 */
export function parseStepRecord(runId: string, field: string, text: string, triesText?: string, now: number = Date.now()): StepState {
  const state = parseStepRecordOnly(runId, field, text, now);
  if (state.status === 'waiting' || state.wakeAt !== undefined) return state;
  if (triesText === undefined) return { ...state, attempts: 1 };
  const tries = parseTriesRecord(runId, TRIES_FIELD_PREFIX + state.name, triesText);
  const retry = state.status === 'failed' && tries.retryAt > 0 ? { retryAt: tries.retryAt } : {};
  return { ...state, attempts: tries.failures + (state.status === 'succeeded' ? 1 : 0), lastError: tries.lastError as StepState['lastError'], ...retry };
}

function parseStepRecordOnly(runId: string, field: string, text: string, now: number): StepState {
  const r = decodeJson(text, runId, field) as StepRecord;
  if (!Array.isArray(r) || r.length < 4 || ![0, 1, 2, 3, 4, 5].includes(r[0])) {
    throw new CorruptRunDataError(runId, `field "${field}" is not a step record`);
  }
  const base = { name: field.slice(STEP_FIELD_PREFIX.length), seq: r[1], attempt: r[2] };
  switch (r[0]) {
    case 2: {
      const wakeAt = r[3] as number;
      return { ...base, status: wakeAt > now ? ('waiting' as const) : ('succeeded' as const), wakeAt };
    }
    case 3:
      return { ...base, status: 'waiting' as const, childRunId: r[3] as string };
    case 4:
      return { ...base, status: 'waiting' as const, signal: r[3] as string, ...(r[4] ? { wakeAt: r[4] as number } : {}) };
    case 5:
      return { ...base, status: 'waiting' as const, event: r[3] as string, match: (r[5] ?? {}) as Record<string, unknown>, ...(r[4] ? { wakeAt: r[4] as number } : {}) };
    default: {
      const finishedAt = r[3] as number;
      const timing = { finishedAt, startedAt: finishedAt - (r[4] as number) };
      if (r[0] === 1) return { ...base, status: 'succeeded' as const, ...timing, ...(r.length > 5 ? { output: r[5] } : {}) };
      return { ...base, status: 'failed' as const, ...timing, error: r[5] as { name: string; message: string; stack?: string } };
    }
  }
}
