/**
 * The run-record codec: how a run's hash in Redis becomes a `RunState` (`parseRun`, strict: a
 * damaged field is a `CorruptRunDataError`) or a list row (`summarizeRun`, lenient: a damaged
 * field marks the row corrupt). Writes happen in the Lua scripts; step records have their own
 * codec in `step-record.ts`.
 */
import { parseVersionQueue } from '../definition/option-checks';
import {
  RUN_STATUSES,
  WAIT_KINDS,
  type CorruptRunSummary,
  type IntactRunSummary,
  type RunState,
  type RunStatus,
  type RunSummary,
  type WaitingFor,
  type WaitKind,
} from '../definition/run-types';
import { checkTraceContext, type TraceContext } from '../definition/tracing';
import { CorruptRunDataError } from '../errors';
import { PLAIN_PAYLOADS, type Payloads } from './payloads';
import { decodeJson } from './serialization';

/** The fields of a run hash that a `RunState` is read from. */
export const RUN_FIELDS = [
  'workflow',
  'queue',
  'status',
  'input',
  'batch',
  'output',
  'error',
  'attempt',
  'maxAttempts',
  'createdAt',
  'availableAt',
  'startedAt',
  'finishedAt',
  'cancelReason',
  'idempotencyKey',
  'parent',
  'progress',
  'compensated',
  'compError',
  'timeout',
  'deadline',
  'wait',
] as const;

/**
 * What a run waits for, from its `wait` field ("<kind>\n<name>\n<until>", written by `finish` when
 * a step suspends the run, deleted when it leaves `scheduled`: `includes/index.lua`), only while
 * it is `scheduled`; undefined otherwise, and for a field that is not one (a damaged field is left out).
 */
export function parseWait(status: string | null | undefined, wait: string | null | undefined): WaitingFor | undefined {
  if (status !== 'scheduled' || !wait) return undefined;
  const [kind, name, until] = wait.split('\n');
  if (!(WAIT_KINDS as readonly string[]).includes(kind)) return undefined;
  const waitingFor: WaitingFor = { kind: kind as WaitKind };
  if (name) waitingFor.name = name;
  const due = Number(until);
  if (Number.isFinite(due) && due > 0) waitingFor.until = due;
  return waitingFor;
}

/** A numeric field of a stored run: undefined when absent, `CorruptRunDataError` when not a number. */
function num(value: string | null | undefined, id: string, field: string): number | undefined {
  if (value == null || value === '') return undefined;
  const n = Number(value);
  if (!Number.isFinite(n)) throw new CorruptRunDataError(id, `field "${field}" is not a number`);
  return n;
}

/** Reads a stored run. Throws `CorruptRunDataError` when required fields are missing or undecodable. */
export function parseRun<TOutput>(
  id: string,
  f: Partial<Record<(typeof RUN_FIELDS)[number], string | null>>,
  payloads: Payloads = PLAIN_PAYLOADS,
): RunState<TOutput> {
  if (!f.workflow || !f.queue || !f.status) throw new CorruptRunDataError(id, 'the run hash has no workflow, queue or status field');
  if (!isRunStatus(f.status)) throw new CorruptRunDataError(id, `field "status" has the unknown value ${JSON.stringify(cutText(f.status, 40))}`);
  // A run of version N > 1 waits in "<queue>@v<N>": shown as its queue and version.
  const { queue, version } = parseVersionQueue(f.queue);
  const run: RunState<TOutput> = {
    id,
    workflow: f.workflow,
    queue,
    version,
    status: f.status,
    input: payloads.openInput(f.input, { kind: 'input', runId: id }, f.batch === '1'),
    attempt: num(f.attempt, id, 'attempt') ?? 0,
    maxAttempts: num(f.maxAttempts, id, 'maxAttempts') ?? 1,
    createdAt: num(f.createdAt, id, 'createdAt') ?? 0,
    availableAt: num(f.availableAt, id, 'availableAt') ?? 0,
  };
  if (f.output) run.output = payloads.openText(f.output, 'output', { kind: 'output', runId: id }) as TOutput;
  // A succeeded run has no error: an error left by a failed earlier attempt is not the run's.
  if (f.error && f.status !== 'succeeded') run.error = decodeJson(f.error, id, 'error') as RunState['error'];
  const startedAt = num(f.startedAt, id, 'startedAt');
  if (startedAt !== undefined) run.startedAt = startedAt;
  const finishedAt = num(f.finishedAt, id, 'finishedAt');
  if (finishedAt !== undefined) run.finishedAt = finishedAt;
  if (f.cancelReason) run.cancelReason = f.cancelReason;
  if (f.idempotencyKey) run.idempotencyKey = f.idempotencyKey;
  if (f.parent) run.parentId = f.parent;
  if (f.progress) run.progress = payloads.openText(f.progress, 'progress', { kind: 'progress', runId: id });
  if (f.compensated === '1') run.compensated = true;
  if (f.compError) run.compensationError = decodeJson(f.compError, id, 'compError') as RunState['compensationError'];
  const timeoutMs = num(f.timeout, id, 'timeout');
  if (timeoutMs !== undefined) run.timeoutMs = timeoutMs;
  const deadline = num(f.deadline, id, 'deadline');
  if (deadline !== undefined) run.deadline = deadline;
  const waitingFor = parseWait(f.status, f.wait);
  if (waitingFor) run.waitingFor = waitingFor;
  return run;
}

/** What a run summary is read from: never input, output or step records. */
export const SUMMARY_FIELDS = [
  'workflow',
  'queue',
  'status',
  'attempt',
  'maxAttempts',
  'createdAt',
  'availableAt',
  'startedAt',
  'finishedAt',
  'parent',
  'error',
  'wait',
] as const;

/** Longest error message of a run summary, '…' included. */
const SUMMARY_MESSAGE_CHARS = 200;

/** True for one of the run statuses. */
export function isRunStatus(value: string | null | undefined): value is RunStatus {
  return (RUN_STATUSES as readonly (string | null | undefined)[]).includes(value);
}

/** `text` cut to `max` characters, the last one '…', without splitting a surrogate pair. */
export function cutText(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  const last = text.charCodeAt(end - 1);
  if (last >= 0xd800 && last <= 0xdbff) end--;
  return `${text.slice(0, end)}…`;
}

/**
 * A list row from a run's summary fields. Never throws: a field that is missing or cannot be
 * read is left out and named in `corrupt`, and a bad status is replaced by the status of the
 * index the run was listed from, when there is one.
 */
export function summarizeRun(
  id: string,
  f: Record<Exclude<(typeof SUMMARY_FIELDS)[number], 'wait'>, string | null> & { wait?: string | null },
  indexStatus?: RunStatus,
): RunSummary {
  const problems: string[] = [];
  const row: Partial<IntactRunSummary> & { id: string } = { id };
  const text = (field: 'workflow' | 'queue') => {
    if (f[field]) row[field] = f[field];
    else problems.push(`field "${field}" is missing`);
  };
  const number = (field: 'attempt' | 'maxAttempts' | 'createdAt' | 'availableAt' | 'startedAt' | 'finishedAt', required: boolean) => {
    const value = f[field];
    if (value === null) {
      if (required) problems.push(`field "${field}" is missing`);
      return;
    }
    const n = value.trim() === '' ? NaN : Number(value);
    if (Number.isFinite(n)) row[field] = n;
    else problems.push(`field "${field}" is not a number`);
  };
  text('workflow');
  text('queue');
  if (row.queue !== undefined) Object.assign(row, parseVersionQueue(row.queue));
  if (isRunStatus(f.status)) row.status = f.status;
  else {
    problems.push(f.status === null ? 'field "status" is missing' : `field "status" has the unknown value ${JSON.stringify(cutText(f.status, 40))}`);
    if (indexStatus) row.status = indexStatus;
  }
  number('attempt', true);
  number('maxAttempts', true);
  number('createdAt', true);
  number('availableAt', true);
  number('startedAt', false);
  number('finishedAt', false);
  if (row.startedAt !== undefined && row.finishedAt !== undefined) row.durationMs = row.finishedAt - row.startedAt;
  if (f.parent) row.parentId = f.parent;
  const waitingFor = parseWait(f.status, f.wait);
  if (waitingFor) row.waitingFor = waitingFor;
  if (f.error !== null && f.status !== 'succeeded') {
    let error: unknown;
    try {
      error = JSON.parse(f.error);
    } catch {
      problems.push('field "error" is not valid JSON');
    }
    if (error !== undefined) {
      const { name, message } = (error ?? {}) as { name?: unknown; message?: unknown };
      if (typeof name === 'string' && typeof message === 'string') row.error = { name, message: cutText(message, SUMMARY_MESSAGE_CHARS) };
      else problems.push('field "error" has no name and message');
    }
  }
  if (!problems.length) return row as IntactRunSummary;
  const corrupt: CorruptRunSummary = { ...row, corrupt: problems.join('; ') };
  return corrupt;
}

/**
 * The run-hash fields (pairs) that store the trace context of the code that started a run:
 * `traceparent` and, when there is one, `tracestate`. The enqueue and start-child scripts write
 * them with the run's other extra fields.
 */
export function traceFields(trace: TraceContext): string[] {
  return trace.tracestate ? ['traceparent', trace.traceparent, 'tracestate', trace.tracestate] : ['traceparent', trace.traceparent];
}

/** The stored trace context of a claimed run, checked again (the hash may have been edited); undefined when none. */
export function readTraceContext(hash: Record<string, string>): TraceContext | undefined {
  const traceparent = hash.traceparent;
  if (!traceparent) return undefined;
  return checkTraceContext({ traceparent, tracestate: hash.tracestate });
}
