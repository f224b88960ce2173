import type { RunState, RunSummary } from '../core/definition/run-types';
import { cutText } from '../core/store/run-record';
import type { DashboardRun } from './dashboard-options';

/**
 * Property names whose values are treated as secrets when run data is shown to a person: passwords,
 * tokens, API keys, cookies, credentials and private keys, in any case and as part of a longer name
 * (`cvcToken`, `db_password`, `X-Api-Key`). It errs on the side of hiding: `passport` matches too.
 */
export const SECRET_KEY = /pass(word)?|passwd|token|secret|authorization|api[-_]?key|cookie|credential|private[-_]?key/i;

/** The text that replaces a secret value. */
const MASK = '***';

/**
 * A deep copy of a JSON value in which the value of every object property whose name is a secret
 * (by `isSecretKey`, at any depth, inside arrays too) is replaced by `'***'`; everything else is
 * copied unchanged. Pure: the argument is not modified. Meant for showing run inputs, outputs and
 * errors, which are JSON, so cycles are not handled.
 *
 * @param value a JSON value (object, array or primitive)
 * @param isSecretKey decides whether a property name is a secret. @default a test against {@link SECRET_KEY}
 */
export function maskSecrets<T>(value: T, isSecretKey: (key: string) => boolean = (key) => SECRET_KEY.test(key)): T {
  const copy = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(copy);
    if (node === null || typeof node !== 'object') return node;
    // fromEntries defines own properties, so a "__proto__" key from JSON stays a plain key.
    return Object.fromEntries(Object.entries(node).map(([key, child]) => [key, isSecretKey(key) ? MASK : copy(child)]));
  };
  return copy(value) as T;
}

/** Longest error name and message of a list row, '…' included: a row stays small whatever a run's error class is called. */
export const ROW_ERROR_NAME_CHARS = 100;
export const ROW_ERROR_MESSAGE_CHARS = 200;

/** The summary fields a list row takes from what `redact` returns; the id is always the run's own. */
const ROW_FIELDS = [
  'workflow',
  'queue',
  'status',
  'attempt',
  'maxAttempts',
  'createdAt',
  'availableAt',
  'startedAt',
  'finishedAt',
  'parentId',
  'durationMs',
  // What a waiting run waits for ({ kind, name?, until? }), once the engine's summaries carry it: no payload.
  'waitingFor',
] as const;

/** A run as a person may see it: the default masking, then the `redact` option, if any. */
export function redactRun(run: DashboardRun, redact?: (run: DashboardRun) => DashboardRun): DashboardRun {
  const masked = maskSecrets(run);
  return redact ? redact(masked) : masked;
}

/**
 * A list row as a person may see it: `redact` gets the row as a run without input, output and
 * steps (after the default masking), and the row shows the summary fields of what it returns,
 * with the error's name and message cut to 100 and 200 characters. A corrupt row cannot be handed
 * to `redact` as a run, so with a `redact` it keeps only its id, status, creation time and what is
 * wrong.
 */
export function redactSummary(row: RunSummary, redact?: (run: DashboardRun) => DashboardRun): RunSummary {
  if (row.corrupt !== undefined) {
    if (!redact) return row;
    const { id, status, createdAt, corrupt } = row;
    return { id, status, createdAt, corrupt };
  }
  const shown = redact
    ? (redactRun({ ...(row as unknown as RunState), input: undefined, output: undefined, steps: [] }, redact) as unknown as Partial<Record<string, unknown>> &
        Pick<RunState, 'error'>)
    : (row as unknown as Partial<Record<string, unknown>> & Pick<RunState, 'error'>);
  const result: Record<string, unknown> = { id: row.id };
  for (const field of ROW_FIELDS) if (shown[field] !== undefined) result[field] = shown[field];
  if (shown.error)
    result.error = { name: cutText(String(shown.error.name), ROW_ERROR_NAME_CHARS), message: cutText(String(shown.error.message), ROW_ERROR_MESSAGE_CHARS) };
  return result as unknown as RunSummary;
}
