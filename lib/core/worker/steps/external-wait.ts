import { toMs, type Duration } from '../../definition/duration';
import type { StepTarget } from '../../store/redis-scripts';
import { decodeStepRecord, type StoredStep } from '../../store/step-record';
import type { StepHost } from '../step-host';

/**
 * A wait for something from outside the run (a signal or an event): the
 * stored payload on replay; else the script consumes it, records the timeout, or records the
 * wait, and the run suspends until it comes or the deadline passes.
 */
export async function awaitExternal(
  rt: StepHost,
  kind: 'signal' | 'event',
  record: StoredStep | undefined,
  timeout: Duration | undefined,
  name: string,
  field: string,
  script: (target: StepTarget, deadline: number) => Promise<{ code: 'lost' | 'got' | 'timeout' | 'wait'; record: string }>,
): Promise<unknown> {
  if (record?.kind === 'succeeded') return record.output ?? null;
  await rt.ready();
  const deadline = record?.kind === kind ? record.deadline : timeout === undefined ? 0 : rt.ctx.clock.now() + toMs(timeout, `timeout of step "${name}"`);
  const result = await rt.ctx.call(() => script(rt.target(field), deadline));
  if (result.code === 'lost') rt.lost();
  if (result.code === 'wait') rt.suspend(deadline, field);
  const stored = decodeStepRecord(rt.ctx.runId, field, result.record, rt.ctx.payloads);
  return stored.kind === 'succeeded' ? (stored.output ?? null) : null;
}
