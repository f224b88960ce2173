import { matchKey } from '../../definition/event-match';
import { assertKnownKeys, WAIT_FOR_EVENT_OPTION_KEYS } from '../../definition/option-checks';
import { checkEventName, type StepOptions, type WaitForEventOptions } from '../../definition/workflow';
import type { StepApiEntry, StepHost } from '../step-host';
import { awaitExternal } from './external-wait';

/** `step.waitForEvent`. */
export const waitForEvent: StepApiEntry<'waitForEvent'> =
  (rt) =>
  <T>(options: StepOptions | string, event: string, waitOptions?: WaitForEventOptions) =>
    rt.track(waitEvent(rt, options, event, waitOptions)) as Promise<T | null>;

/** `step.waitForEvent`: an event matching the wait, emitted while the run waits (`fan_out()` in `includes/fan-out.lua` wakes it). */
async function waitEvent(rt: StepHost, options: StepOptions | string, event: string, waitOptions: WaitForEventOptions = {}): Promise<unknown> {
  const { name, field, record } = rt.replay.begin('waitForEvent', options);
  checkEventName(event, `The event name of step "${name}"`);
  assertKnownKeys(`step.waitForEvent options of step "${name}"`, waitOptions, WAIT_FOR_EVENT_OPTION_KEYS);
  const key = matchKey(waitOptions.match, `the match of step "${name}"`, rt.ctx.payloads);
  // The match values shown on the waiting step, sealed like any payload.
  const match = { ...key, json: rt.ctx.payloads.seal(key.json, { kind: 'match', runId: rt.ctx.runId }) };
  return awaitExternal(rt, 'event', record, waitOptions.timeout, name, field, (target, deadline) =>
    rt.ctx.scripts.waitEvent(target, event, deadline, rt.ctx.clock.now(), match),
  );
}
