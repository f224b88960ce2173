import { TERMINAL_STATUSES, type AttemptState, type RunState, type StoredError } from '../definition/run-types';
import { CorruptRunDataError } from '../errors';

/**
 * The record of a run attempt that did not end the run well, or that ended a run after an earlier
 * one failed: run-hash field `a:<attempt>`, a JSON array `[finishedAt, outcome, error or null]`,
 * written by that attempt's finish call. A run that succeeds on its first attempt writes none.
 */
export const ATTEMPT_FIELD_PREFIX = 'a:';

/** The field and value an attempt's finish call writes; `errorJson` is the stored error's JSON text. */
export function attemptRecordFields(attempt: number, finishedAt: number, outcome: AttemptState['outcome'], errorJson?: string): [string, string] {
  return [`${ATTEMPT_FIELD_PREFIX}${attempt}`, `[${finishedAt},${JSON.stringify(outcome)},${errorJson ?? 'null'}]`];
}

const OUTCOMES = new Set<string>(['retry', 'failed', 'succeeded']);

function parseAttemptRecord(runId: string, field: string, text: string): AttemptState {
  const corrupt = () => new CorruptRunDataError(runId, `field "${field}" is not an attempt record`);
  let r: unknown;
  try {
    r = JSON.parse(text);
  } catch {
    throw corrupt();
  }
  const attempt = Number(field.slice(ATTEMPT_FIELD_PREFIX.length));
  if (!Array.isArray(r) || r.length !== 3 || typeof r[0] !== 'number' || !OUTCOMES.has(r[1] as string) || !(attempt >= 1)) throw corrupt();
  const state: AttemptState = { attempt, outcome: r[1] as AttemptState['outcome'], finishedAt: r[0] };
  if (r[2] !== null) state.error = r[2] as StoredError;
  return state;
}

/**
 * A run's attempts, oldest first, from its hash: the stored records, and for an ended run whose
 * last attempt left none (it succeeded at once, or was canceled or terminated) that attempt as
 * the run's end says.
 */
export function attemptsOf(runId: string, hash: Record<string, string>, run: RunState | null): AttemptState[] {
  const attempts: AttemptState[] = [];
  for (const [field, value] of Object.entries(hash)) if (field.startsWith(ATTEMPT_FIELD_PREFIX)) attempts.push(parseAttemptRecord(runId, field, value));
  attempts.sort((a, b) => a.attempt - b.attempt);
  const ended = run?.finishedAt !== undefined && TERMINAL_STATUSES.has(run.status);
  if (run && ended && run.attempt >= 1 && !attempts.some((a) => a.attempt === run.attempt)) {
    const last: AttemptState = { attempt: run.attempt, outcome: run.status as AttemptState['outcome'], finishedAt: run.finishedAt! };
    if (run.error && run.status !== 'succeeded') last.error = run.error;
    attempts.push(last);
  }
  return attempts;
}
