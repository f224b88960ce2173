import { RunScripts } from './run-scripts';

/** Where a step's record goes when a script writes it together with its effect. */
export interface StepTarget {
  runId: string;
  token: string;
  field: string;
  seq: number;
  attempt: number;
}

/** The arguments of a step record a script writes with its effect; empty values when there is none. */
function stepArgs(step: StepTarget | undefined): StepTarget {
  if (!step) return { runId: '', token: '', field: '', seq: 0, attempt: 0 };
  return { runId: step.runId, token: step.token, field: step.field, seq: step.seq, attempt: step.attempt };
}

/**
 * The scripts a running step calls besides its checkpoint: child runs, signals, waits for a
 * signal, an event or the first of several branches, and events (`emitEvent`, `cancelOn`).
 */
export class WaitScripts extends RunScripts {
  async startChild(a: {
    step: StepTarget;
    now: number;
    mode: 'wait' | 'emit' | 'race';
    childId: string;
    workflow: string;
    queue: string;
    maxAttempts: string;
    input: string;
    runAt: number;
    idempotencyKey: string;
    idempotencyTtlSec: number;
    deadline: number;
    /** True when the caller has the child's definition and computed `debounce` and `extra` from it. */
    localFlow: boolean;
    debounce?: { key: string; periodMs: number; timeoutMs: number };
    extra: string[];
  }): Promise<{ code: 'ok' | 'lost' | 'unknown' | 'conflict' | 'dynamic'; childId: string; record: string }> {
    const k = this.keys;
    const reply = (await this.call('start-child', [k.run(a.step.runId)], {
      base: k.base,
      ...stepArgs(a.step),
      now: a.now,
      mode: a.mode,
      childId: a.childId,
      workflow: a.workflow,
      queue: a.queue,
      maxAttempts: a.maxAttempts,
      input: a.input,
      runAt: a.runAt,
      idempotencyKey: a.idempotencyKey,
      idempotencyTtlSec: a.idempotencyTtlSec,
      deadline: a.deadline,
      localFlow: a.localFlow ? '1' : '0',
      debounceKey: a.debounce ? k.debounce(a.workflow, a.debounce.key) : '',
      debouncePeriodMs: a.debounce?.periodMs ?? 0,
      debounceTimeoutMs: a.debounce?.timeoutMs ?? 0,
      extra: a.extra,
    })) as string[];
    return { code: reply[0] as 'ok', childId: reply[1] ?? '', record: reply[2] ?? '' };
  }

  /** `signal-2.lua`: delivers a signal into the waiting step, or buffers it. */
  async signal(runId: string, name: string, payload: string, now: number, max: number): Promise<'delivered' | 'buffered' | 'full' | 'ended' | 'missing'> {
    const k = this.keys;
    return (await this.call('signal', [k.run(runId), k.signals(runId)], { base: k.base, runId, name, payload, now, max })) as 'delivered';
  }

  /** `wait-signal-2.lua`: consumes a buffered signal, records a timeout, or records the wait. */
  async waitSignal(step: StepTarget, name: string, deadline: number, now: number): Promise<{ code: 'lost' | 'got' | 'timeout' | 'wait'; record: string }> {
    const k = this.keys;
    const keys = [k.run(step.runId), k.signals(step.runId)];
    const [code, record] = (await this.call('wait-signal', keys, { base: k.base, ...stepArgs(step), name, deadline, now })) as [
      'lost' | 'got' | 'timeout' | 'wait',
      string?,
    ];
    return { code, record: record ?? '' };
  }

  /**
   * `wait-any-2.lua`: decides a step.waitForAny race (a branch won, or one is ready now) and ends it,
   * or records and registers it. `race` is the new race record and its branches, when the step has none.
   */
  async waitAny(
    step: StepTarget,
    now: number,
    race?: { record: string; branches: string },
  ): Promise<{ code: 'lost' | 'corrupt' | 'done' | 'wait'; record: string }> {
    const k = this.keys;
    const [code, record] = (await this.call('wait-any', [k.run(step.runId), k.signals(step.runId)], {
      base: k.base,
      runId: step.runId,
      token: step.token,
      field: step.field,
      now,
      raceRecord: race?.record ?? '',
      raceBranches: race?.branches ?? '',
    })) as ['lost' | 'corrupt' | 'done' | 'wait', string?];
    return { code, record: record ?? '' };
  }

  /** `wait-event-1.lua`: records a timeout, or records and registers the wait. */
  async waitEvent(
    step: StepTarget,
    event: string,
    deadline: number,
    now: number,
    match: { shape: string; hash: string; json: string },
  ): Promise<{ code: 'lost' | 'got' | 'timeout' | 'wait'; record: string }> {
    const k = this.keys;
    const [code, record] = (await this.call('wait-event', [k.run(step.runId)], {
      base: k.base,
      ...stepArgs(step),
      event,
      deadline,
      now,
      matchShape: match.shape,
      matchHash: match.hash,
      matchJson: match.json,
    })) as ['lost' | 'got' | 'timeout' | 'wait', string?];
    return { code, record: record ?? '' };
  }

  /** `register-cancel-on-1.lua`: registers a run's cancelOn triggers. */
  async registerCancelOn(runId: string, token: string, triggers: Array<{ event: string; shape: string; hash: string }>): Promise<'ok' | 'lost'> {
    const k = this.keys;
    const flat = triggers.flatMap((t) => [t.event, t.shape, t.hash]);
    return (await this.call('register-cancel-on', [k.run(runId)], { base: k.base, runId, token, triggers: flat })) as 'ok';
  }

  async emitEvent(a: {
    eventId: string;
    event: string;
    payload: string;
    /** The payload's top-level scalar fields (`eventFields`), for the runs waiting on a match. */
    fields: string;
    now: number;
    emitAt: number;
    idempotencyKey: string;
    idempotencyTtlSec: number;
    step?: StepTarget;
  }): Promise<{ code: 'ok' | 'lost'; runIds: string[] }> {
    const k = this.keys;
    const reply = (await this.call('emit-event', [k.eventSubscribers(a.event)], {
      base: k.base,
      eventId: a.eventId,
      event: a.event,
      payload: a.payload,
      now: a.now,
      emitAt: a.emitAt,
      idempotencyKey: a.idempotencyKey,
      idempotencyTtlSec: a.idempotencyTtlSec,
      ...stepArgs(a.step),
      fields: a.fields,
    })) as string[];
    return { code: reply[0] as 'ok', runIds: reply.slice(1) };
  }

  async fireEvents(now: number, batch: number): Promise<number> {
    return Number(await this.call('fire-events', [this.keys.eventsDue()], { base: this.keys.base, now, batch }));
  }
}
