import { timeOption } from '../../definition/duration';
import { eventFields } from '../../definition/event-match';
import { EMIT_EVENT_STEP_OPTION_KEYS } from '../../definition/option-checks';
import { checkEventName, type EmitEventStepOptions } from '../../definition/workflow';
import { encodeJson } from '../../store/serialization';
import type { StepApiEntry, StepHost } from '../step-host';

/** `step.emitEvent`. */
export const emitEvent: StepApiEntry<'emitEvent'> = (rt) => (options, event, payload) => rt.track(emit(rt, options, event, payload));

/**
 * `step.emitEvent`: the event's id is the step's, so a replayed emit starts no run twice; the
 * script writes the step's record (the ids of the runs it started) with the emit.
 */
async function emit(rt: StepHost, options: EmitEventStepOptions | string, event: string, payload: unknown): Promise<string[]> {
  const { ctx } = rt;
  const { opts, name, field, record } = rt.replay.begin<EmitEventStepOptions>('emitEvent', options, EMIT_EVENT_STEP_OPTION_KEYS);
  checkEventName(event, `The event name of step "${name}"`);
  if (record?.kind === 'succeeded') return record.output as string[];
  await rt.ready();
  const result = await ctx.call(() =>
    ctx.scripts.emitEvent({
      eventId: `${ctx.runId}.${name}`,
      event,
      payload: ctx.payloads.seal(encodeJson(payload, `The payload of event "${event}" (step "${name}")`, ctx.maxPayloadBytes), { kind: 'event' }),
      fields: eventFields(payload, ctx.payloads),
      now: ctx.clock.now(),
      emitAt: timeOption(opts.emitAt, 'emitAt'),
      idempotencyKey: '',
      idempotencyTtlSec: 1,
      step: rt.target(field),
    }),
  );
  if (result.code === 'lost') rt.lost();
  return result.runIds;
}
