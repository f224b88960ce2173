import { timeOption, toMs, type Duration } from '../../definition/duration';
import type { StepOptions } from '../../definition/workflow';
import { encodeSleepRecord } from '../../store/step-record';
import type { StepApiEntry, StepHost } from '../step-host';

/** `step.sleep`. */
export const sleep: StepApiEntry<'sleep'> = (rt) => (options, target) => sleepUntil(rt, options, target);

/** `step.waitFor`: the former name of `step.sleep`, the same step (a run started with one resumes with the other). */
export const waitFor: StepApiEntry<'waitFor'> = (rt) => (options, target) => sleepUntil(rt, options, target);

/**
 * `step.sleep`: the wake time is stored with the next checkpoint (the finish script, when the run
 * suspends at once), so a replay wakes at the same time; a due one returns.
 */
async function sleepUntil(rt: StepHost, options: StepOptions | string, target: Duration | Date): Promise<void> {
  const { field, name, record } = rt.replay.begin('waitFor', options);
  const what = `sleep target of step "${name}"`;
  let wakeAt: number;
  if (record?.kind === 'sleeping') {
    wakeAt = record.wakeAt;
  } else if (record?.kind === 'succeeded') {
    return;
  } else {
    const check = rt.replay.reachNew();
    if (check) await check;
    rt.throwIfStopped();
    const began = rt.ctx.clock.now();
    wakeAt = target instanceof Date ? timeOption(target, what) : began + toMs(target, what);
    rt.writer.record(field, encodeSleepRecord(rt.replay.nextSeq(), rt.ctx.attempt, wakeAt, began));
  }
  if (rt.ctx.clock.now() >= wakeAt) return;
  rt.suspend(wakeAt);
}
