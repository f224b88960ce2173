import { COMPENSATION_COMMITTED, COMPENSATION_FIELD_PREFIX, COMPENSATION_PENDING, encodeSuccessRecord } from '../../store/step-record';
import type { StepApiEntry, StepHost } from '../step-host';

/** `step.commit`. */
export const commit: StepApiEntry<'commit'> = (rt) => (name) => rt.track(commitCompensations(rt, name));

/**
 * `step.commit(name)`: every compensation due so far (stored, or written by this attempt) becomes
 * final (`c:<step>` = "x") in one checkpoint with the commit's own step record, after every earlier
 * step is stored. Steps that complete after it stay compensable.
 */
async function commitCompensations(rt: StepHost, options: string): Promise<void> {
  const { field, record } = rt.replay.begin('commit', options);
  if (record?.kind === 'succeeded') return;
  await rt.ready();
  for (const [key, value] of rt.journal()) {
    if (key.startsWith(COMPENSATION_FIELD_PREFIX) && value === COMPENSATION_PENDING) rt.writer.record(key, COMPENSATION_COMMITTED);
  }
  const now = Date.now();
  rt.writer.record(field, encodeSuccessRecord(rt.replay.nextSeq(), rt.ctx.attempt, now, 0, ''));
  await rt.writer.durable();
}
