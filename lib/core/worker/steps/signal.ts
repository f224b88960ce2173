import { assertKnownKeys, checkUserName, WAIT_FOR_SIGNAL_OPTION_KEYS } from '../../definition/option-checks';
import { signalName, type SignalDefinition } from '../../definition/signal-definition';
import type { StepOptions, WaitForSignalOptions } from '../../definition/workflow';
import type { StepApiEntry, StepHost } from '../step-host';
import { awaitExternal } from './external-wait';

/** `step.waitForSignal`. */
export const waitForSignal: StepApiEntry<'waitForSignal'> =
  (rt) =>
  <T>(options: StepOptions | string, signal: string | SignalDefinition<T>, waitOptions?: WaitForSignalOptions) =>
    rt.track(waitSignal(rt, options, signalName(signal), waitOptions)) as Promise<T | null>;

/** `step.waitForSignal`: a signal buffered for the run, or one sent while it waits (`signal-2.lua`). */
async function waitSignal(rt: StepHost, options: StepOptions | string, signal: string, waitOptions: WaitForSignalOptions = {}): Promise<unknown> {
  const { name, field, record } = rt.replay.begin('waitForSignal', options);
  checkUserName(signal, `The signal name of step "${name}"`);
  assertKnownKeys(`step.waitForSignal options of step "${name}"`, waitOptions, WAIT_FOR_SIGNAL_OPTION_KEYS);
  return awaitExternal(rt, 'signal', record, waitOptions.timeout, name, field, (target, deadline) =>
    rt.ctx.scripts.waitSignal(target, signal, deadline, rt.ctx.clock.now()),
  );
}
