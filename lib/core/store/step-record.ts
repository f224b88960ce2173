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
 */
export type StepRecord = [kind: 0 | 1 | 2 | 3 | 4, seq: number, attempt: number, a: unknown, b?: unknown, value?: unknown];

/** Prefix of step record fields in the run hash. */
export const STEP_FIELD_PREFIX = 's:';

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

/** Reads a stored step record into its public form. */
export function parseStepRecord(runId: string, field: string, text: string): StepState {
  const r = decodeJson(text, runId, field) as StepRecord;
  if (!Array.isArray(r) || r.length < 4 || ![0, 1, 2, 3, 4].includes(r[0])) {
    throw new CorruptRunDataError(runId, `field "${field}" is not a step record`);
  }
  const base = { name: field.slice(STEP_FIELD_PREFIX.length), seq: r[1], attempt: r[2] };
  switch (r[0]) {
    case 2: {
      const wakeAt = r[3] as number;
      return { ...base, status: wakeAt > Date.now() ? ('waiting' as const) : ('succeeded' as const), wakeAt };
    }
    case 3:
      return { ...base, status: 'waiting' as const, childRunId: r[3] as string };
    case 4:
      return { ...base, status: 'waiting' as const, signal: r[3] as string, ...(r[4] ? { wakeAt: r[4] as number } : {}) };
    default: {
      const finishedAt = r[3] as number;
      const timing = { finishedAt, startedAt: finishedAt - (r[4] as number) };
      if (r[0] === 1) return { ...base, status: 'succeeded' as const, ...timing, ...(r.length > 5 ? { output: r[5] } : {}) };
      return { ...base, status: 'failed' as const, ...timing, error: r[5] as { name: string; message: string; stack?: string } };
    }
  }
}
