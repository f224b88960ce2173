import { timeOption, toMs } from '../../definition/duration';
import { matchKey } from '../../definition/event-match';
import { checkUserName } from '../../definition/option-checks';
import { childBranch, eventBranch, raceBranch, raceBranches, type RaceBranchSpec } from '../../definition/race';
import type { RaceBranch, RaceResult } from '../../definition/step-types';
import { checkEventName, type StepOptions, type WorkflowTarget } from '../../definition/workflow';
import { ConfigurationError, CorruptRunDataError } from '../../errors';
import type { StepTarget } from '../../store/redis-scripts';
import { deserializeError } from '../../store/serialization';
import { decodeStepRecord, encodeRaceRecord, RACE_FIELD_PREFIX, type RaceBranchRecord } from '../../store/step-record';
import type { StepApiEntry, StepHost } from '../step-host';
import { STEP_NAME_RULES } from '../step-journal';
import { callStartChild } from './child-run';

/** `step.waitForAny`. */
export const waitForAny: StepApiEntry<'waitForAny'> =
  (rt) =>
  <B extends Record<string, RaceBranch>>(options: StepOptions | string, branches: B) =>
    rt.track(runRace(rt, options, branches)) as Promise<RaceResult<B>>;

/** `step.signal`: a branch of `step.waitForAny`, no effect by itself. */
export const signal: StepApiEntry<'signal'> = () => (name) => raceBranch({ kind: 'signal', signal: name });

/** `step.timer`: a branch of `step.waitForAny`. */
export const timer: StepApiEntry<'timer'> = () => (target) => raceBranch({ kind: 'timer', target });

/** `step.child`: a branch of `step.waitForAny`. */
export const child: StepApiEntry<'child'> = () => (workflow, input, options) => raceBranch(childBranch(workflow as WorkflowTarget, input, options));

/** `step.event`: a branch of `step.waitForAny`. */
export const event: StepApiEntry<'event'> = () => (name, options) => raceBranch(eventBranch(name, options));

/**
 * `step.waitForAny`: the stored winner on replay; else the children of child branches start (once:
 * their ids are deterministic) and `wait-any` decides the race if a branch is ready, or records
 * and registers it, and the run suspends until a branch wins (a signal or a child's end, written
 * by `signal` / `notify_waiters`) or its earliest timer is due. A winner found next to the race's
 * branches field was written while the run waited: `wait-any` ends the race (unregisters the
 * branches, cancels or abandons losing children) before the step returns it.
 */
async function runRace(rt: StepHost, options: StepOptions | string, branches: unknown): Promise<unknown> {
  const { ctx } = rt;
  const { name, field, record } = rt.replay.begin('waitForAny', options);
  const what = `step.waitForAny "${name}"`;
  const specs = raceBranches(branches, what);
  const signals = new Map<string, string>();
  for (const [key, spec] of specs) {
    checkUserName(key, `A branch key of ${what}`, STEP_NAME_RULES);
    if (spec.kind === 'signal') {
      checkUserName(spec.signal, `The signal name of branch "${key}" of ${what}`);
      const other = signals.get(spec.signal);
      if (other !== undefined) {
        throw new ConfigurationError(`Branches "${other}" and "${key}" of ${what} both wait for signal "${spec.signal}": give each signal one branch.`);
      }
      signals.set(spec.signal, key);
    }
    if (spec.kind === 'event') checkEventName(spec.event, `The event name of branch "${key}" of ${what}`);
  }
  // A winner next to the branches field: the race is not over until the lease holder ends it
  // (a compensating replay writes nothing, so it takes the winner as it is).
  const pending = rt.replay.stored.has(RACE_FIELD_PREFIX + name) && !rt.replay.replayOnly;
  if (!pending && record?.kind === 'succeeded') return record.output;
  if (!pending && record?.kind === 'failed') throw deserializeError(JSON.stringify(record.error));
  if (record && record.kind !== 'race' && record.kind !== 'succeeded' && record.kind !== 'failed') {
    throw new CorruptRunDataError(ctx.runId, `field "${field}" holds a ${record.kind} record, not the race of step.waitForAny "${name}"`);
  }
  await rt.ready();
  const target = rt.target(field);
  let race: { record: string; branches: string } | undefined;
  if (record === undefined) {
    const now = ctx.clock.now();
    const dues = new Map<string, number>();
    for (const [key, spec] of specs) {
      if (spec.kind !== 'timer') continue;
      const label = `timer of branch "${key}" of ${what}`;
      dues.set(key, spec.target instanceof Date ? timeOption(spec.target, label) : now + toMs(spec.target, label));
    }
    const stored: RaceBranchRecord[] = [];
    for (const [key, spec] of specs) {
      if (spec.kind === 'signal') stored.push([key, 's', spec.signal]);
      else if (spec.kind === 'timer') stored.push([key, 't', dues.get(key)!]);
      else if (spec.kind === 'event') {
        const { shape, hash } = matchKey(spec.match, `the match of branch "${key}" of ${what}`, rt.ctx.payloads);
        stored.push([key, 'e', spec.event, shape, hash]);
      } else stored.push([key, 'c', await startRaceChild(rt, target, name, key, spec), spec.onLose]);
    }
    race = encodeRaceRecord(target.seq, ctx.attempt, dues.size ? Math.min(...dues.values()) : 0, stored, now);
  }
  const result = await ctx.call(() => ctx.scripts.waitAny(target, ctx.clock.now(), race));
  if (result.code === 'lost') rt.lost();
  if (result.code === 'corrupt') {
    throw new CorruptRunDataError(ctx.runId, `field "${field}" or "${RACE_FIELD_PREFIX}${name}" is not the race of step.waitForAny "${name}"`);
  }
  const stored = decodeStepRecord(ctx.runId, field, result.record, ctx.payloads);
  if (stored.kind === 'race') rt.suspend(stored.deadline, field);
  if (stored.kind === 'succeeded') return stored.output;
  if (stored.kind === 'failed') throw deserializeError(JSON.stringify(stored.error));
  throw new CorruptRunDataError(ctx.runId, `field "${field}" holds a ${stored.kind} record after the race of step.waitForAny "${name}"`);
}

/** Starts (or finds, on a replay) the child run of a waitForAny branch; returns its id. */
async function startRaceChild(rt: StepHost, target: StepTarget, name: string, key: string, spec: Extract<RaceBranchSpec, { kind: 'child' }>): Promise<string> {
  const { result } = await callStartChild(rt, {
    step: target,
    mode: 'race',
    childId: `${rt.ctx.runId}.${name}.${key}`,
    workflow: spec.workflow,
    input: spec.input,
    what: `branch "${key}" of step "${name}"`,
    runAt: 0,
    idempotencyKey: '',
    idempotencyTtlSec: 1,
    deadline: 0,
  });
  return result.childId;
}
