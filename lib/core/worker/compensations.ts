import { stepRetryDelayMs } from '../definition/retry';
import { CanceledError, ConfigurationError, CorruptRunDataError, isRetryable } from '../errors';
import type { Payloads } from '../store/payloads';
import { COMPENSATION_FIELD_PREFIX, COMPENSATION_PENDING, decodeStepRecord, encodeSuccessRecord, STEP_FIELD_PREFIX } from '../store/step-record';
import type { AttemptContext, RegisteredCompensation } from './step-runtime';

/** A compensation that is due: its step's name, completion order and output. */
export interface DueCompensation {
  step: string;
  seq: number;
  output: unknown;
}

/**
 * The compensations a run's journal says are due (`c:<step>` = "0"), in the order they run: the
 * reverse of the order their steps completed (the steps' `seq`), parallel branches included.
 */
export function dueCompensations(runId: string, journal: ReadonlyMap<string, string>, payloads?: Payloads): DueCompensation[] {
  const due: DueCompensation[] = [];
  for (const [field, value] of journal) {
    if (!field.startsWith(COMPENSATION_FIELD_PREFIX) || value !== COMPENSATION_PENDING) continue;
    const step = field.slice(COMPENSATION_FIELD_PREFIX.length);
    const stored = journal.get(STEP_FIELD_PREFIX + step);
    const record = stored === undefined ? undefined : decodeStepRecord(runId, STEP_FIELD_PREFIX + step, stored, payloads);
    if (record?.kind !== 'succeeded')
      throw new CorruptRunDataError(runId, `field "${field}" marks a compensation due for step "${step}", which has no succeeded step record`);
    due.push({ step, seq: record.seq, output: record.output });
  }
  return due.sort((a, b) => b.seq - a.seq);
}

/**
 * What running compensations needs from the attempt that holds the run: the step runtime's
 * context (ids, lease, clock, scripts, the outage-riding `call`, `onLost`), with its own stop
 * reason and signal (a run that timed out still compensates; only a cancel or a lost lease stops it).
 */
export type CompensationHost = Pick<
  AttemptContext,
  'runId' | 'workflow' | 'token' | 'attempt' | 'leaseMs' | 'clock' | 'scripts' | 'call' | 'confirmLease' | 'stopReason' | 'onLost'
> & {
  /** Aborts when the work must stop. */
  signal: AbortSignal;
};

/** How a compensation phase ended. */
export type CompensationResult = { ok: true; ran: string[] } | { ok: false; ran: string[]; step: string; error: unknown };

/**
 * Runs the due compensations one at a time, in order. Each is tried by its step's
 * `compensateRetries` (waits in process) and, once it returns, stored as done (`c:<step>` = a
 * success record) by a checkpoint that is awaited before the next one starts: a compensation that
 * succeeded never runs again, whatever crashes later. Resolves with the first one that failed for
 * good, if any; rejects when the run must stop (it was taken from this worker).
 */
export async function runCompensations(
  host: CompensationHost,
  due: readonly DueCompensation[],
  registered: ReadonlyMap<string, RegisteredCompensation>,
  reason: unknown,
): Promise<CompensationResult> {
  const ran: string[] = [];
  for (const { step, output } of due) {
    const compensation = registered.get(step);
    if (!compensation) {
      const error = new ConfigurationError(
        `Run "${host.runId}" has a compensation due for step "${step}", but replaying the workflow did not reach a step "${step}" with a compensate function: ` +
          'the code changed under the run. Restore the step (or its compensate option), then resume the run.',
      );
      return { ok: false, ran, step, error };
    }
    const { retries } = compensation;
    for (let attempt = 1; ; attempt++) {
      stopIfNeeded(host);
      // As a step: only under a lease this worker surely holds.
      const renewing = host.confirmLease();
      if (renewing) await renewing;
      const startedAt = Date.now();
      try {
        await compensation.fn(output, { runId: host.runId, workflow: host.workflow, step, reason, attempt, signal: host.signal });
      } catch (error) {
        stopIfNeeded(host);
        if (attempt >= retries.maxAttempts || !isRetryable(error)) return { ok: false, ran, step, error };
        await pause(host, stepRetryDelayMs(retries, attempt));
        continue;
      }
      const finishedAt = Date.now();
      const record = encodeSuccessRecord(0, host.attempt, finishedAt, finishedAt - startedAt, '');
      const code = await host.call(() => host.scripts.checkpoint(host.runId, host.token, host.clock.now(), [COMPENSATION_FIELD_PREFIX + step, record]));
      if (code !== 'ok') {
        host.onLost(code);
        throw host.stopReason() ?? new CanceledError(host.runId, 'this worker no longer holds the run');
      }
      ran.push(step);
      break;
    }
  }
  return { ok: true, ran };
}

function stopIfNeeded(host: CompensationHost): void {
  const reason = host.stopReason();
  if (reason) throw reason;
}

/** Waits between two tries of a compensation; rejects when the work must stop. */
function pause(host: CompensationHost, ms: number): Promise<void> {
  if (ms <= 0) return Promise.resolve();
  return new Promise<void>((resolve, reject) => {
    const onAbort = () => {
      cancel();
      reject(host.stopReason() ?? new CanceledError(host.runId, 'the worker stopped'));
    };
    const cancel = host.clock.setTimer(ms, () => {
      host.signal.removeEventListener('abort', onAbort);
      resolve();
    });
    host.signal.addEventListener('abort', onAbort, { once: true });
  });
}
