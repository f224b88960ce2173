import { PLAIN_PAYLOADS, type Payloads } from './payloads';
import {
  COMPENSATION_COMMITTED,
  COMPENSATION_FIELD_PREFIX,
  COMPENSATION_PENDING,
  PATCH_FIELD_PREFIX,
  RACE_FIELD_PREFIX,
  VALUE_FIELD_PREFIX,
} from './step-record';

/** Where a step's compensation is: due if the run fails, made final by `step.commit`, or ran. */
export type CompensationRecordState = 'due' | 'committed' | 'done';

/** A branch of a `step.waitForAny` race still waiting, as stored in its `r:` field. */
export type RaceBranchState =
  | { key: string; kind: 'signal'; name: string }
  | { key: string; kind: 'timer'; at: number }
  | { key: string; kind: 'child'; childRunId: string }
  | { key: string; kind: 'event'; name: string };

/**
 * What a run's hash holds besides the run, its steps and attempts, as the dashboard's run page
 * shows it: the `ctx.setEvent` values (`v:<key>`), the `step.patched` answers (`p:<id>`), the
 * compensation record of each step that has one (`c:<step>`), and the branches of races (`r:<step>`).
 */
export interface RunExtras {
  /** Each published value, decoded (a value that is not JSON: its text). */
  values: Record<string, unknown>;
  /** Each `step.patched(id)` answer. */
  patches: Record<string, boolean>;
  compensations: Record<string, CompensationRecordState>;
  /** When each compensation that ran started and ended (from its success record). */
  compensationTimes: Record<string, { startedAt: number; finishedAt: number }>;
  /** The branches of each race that no branch has won yet, by step name. */
  races: Record<string, RaceBranchState[]>;
}

function json(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function branchOf(b: unknown): RaceBranchState | undefined {
  if (!Array.isArray(b) || typeof b[0] !== 'string') return undefined;
  const [key, kind, a] = b as [string, string, unknown];
  if (kind === 's' && typeof a === 'string') return { key, kind: 'signal', name: a };
  if (kind === 't' && typeof a === 'number') return { key, kind: 'timer', at: a };
  if (kind === 'c' && typeof a === 'string') return { key, kind: 'child', childRunId: a };
  if (kind === 'e' && typeof a === 'string') return { key, kind: 'event', name: a };
  return undefined;
}

/** The extras of a whole run hash (see RunExtras); never throws. */
export function runExtrasOf(hash: Record<string, string>, payloads: Payloads = PLAIN_PAYLOADS): RunExtras {
  const extras: RunExtras = { values: {}, patches: {}, compensations: {}, compensationTimes: {}, races: {} };
  for (const [field, value] of Object.entries(hash)) {
    if (field.startsWith(VALUE_FIELD_PREFIX)) extras.values[field.slice(VALUE_FIELD_PREFIX.length)] = payloads.open(json(value), { kind: 'value' });
    else if (field.startsWith(PATCH_FIELD_PREFIX)) extras.patches[field.slice(PATCH_FIELD_PREFIX.length)] = value === '1';
    else if (field.startsWith(COMPENSATION_FIELD_PREFIX)) {
      const step = field.slice(COMPENSATION_FIELD_PREFIX.length);
      extras.compensations[step] = value === COMPENSATION_PENDING ? 'due' : value === COMPENSATION_COMMITTED ? 'committed' : 'done';
      const record = extras.compensations[step] === 'done' ? json(value) : undefined;
      // A compensation that ran has a success record: [1, seq, attempt, finishedAt, durationMs, output?].
      if (Array.isArray(record) && record[0] === 1 && typeof record[3] === 'number' && typeof record[4] === 'number') {
        extras.compensationTimes[step] = { startedAt: record[3] - record[4], finishedAt: record[3] };
      }
    } else if (field.startsWith(RACE_FIELD_PREFIX)) {
      const branches = json(value);
      if (Array.isArray(branches)) extras.races[field.slice(RACE_FIELD_PREFIX.length)] = branches.map(branchOf).filter((b): b is RaceBranchState => !!b);
    }
  }
  return extras;
}
