/**
 * The branches of `step.waitForAny`: `step.signal`, `step.timer` and `step.child` make plain,
 * frozen descriptions, marked so that waitForAny can tell them from any other value. Pure: nothing
 * starts, waits or is stored until waitForAny uses them.
 */
import { ConfigurationError } from '../errors';
import type { Duration } from './duration-format';
import { assertKnownKeys, describeValue, RACE_CHILD_OPTION_KEYS, RACE_EVENT_OPTION_KEYS } from './option-checks';
import type { RaceBranch, RaceChildOptions, RaceEventOptions } from './step-types';
import type { WorkflowTarget } from './workflow-types';

const BRANCH = Symbol('redflow.raceBranch');

/** What a branch is, as waitForAny reads it. */
export type RaceBranchSpec =
  | { kind: 'signal'; signal: string }
  | { kind: 'timer'; target: Duration | Date }
  | { kind: 'child'; workflow: WorkflowTarget; input: unknown; onLose: 'cancel' | 'abandon' }
  | { kind: 'event'; event: string; match: RaceEventOptions['match'] };

/** A branch descriptor: the spec, frozen and marked. */
export function raceBranch<T>(spec: RaceBranchSpec): RaceBranch<T> {
  // The mark is not enumerable: a branch prints, compares and spreads as its spec alone.
  return Object.freeze(Object.defineProperty({ ...spec }, BRANCH, { value: true })) as unknown as RaceBranch<T>;
}

/** The spec of `step.child`'s branch; its options checked. */
export function childBranch(workflow: WorkflowTarget, input: unknown, options: RaceChildOptions | undefined): RaceBranchSpec {
  assertKnownKeys('step.child options', options, RACE_CHILD_OPTION_KEYS);
  const onLose = options?.onLose ?? 'cancel';
  if (onLose !== 'cancel' && onLose !== 'abandon')
    throw new ConfigurationError(`onLose of step.child must be 'cancel' or 'abandon', got ${describeValue(onLose)}.`);
  return { kind: 'child', workflow, input, onLose };
}

/** The spec of `step.event`'s branch; its options checked (the match itself is checked by waitForAny). */
export function eventBranch(event: string, options: RaceEventOptions | undefined): RaceBranchSpec {
  assertKnownKeys('step.event options', options, RACE_EVENT_OPTION_KEYS);
  return { kind: 'event', event, match: options?.match };
}

/**
 * The branches of a waitForAny, in declaration order. `ConfigurationError` for anything but an
 * object of one or more branch descriptors.
 */
export function raceBranches(branches: unknown, what: string): Array<[key: string, spec: RaceBranchSpec]> {
  const example = `step.waitForAny("name", { approved: step.signal('approved'), timeout: step.timer('3d') })`;
  if (typeof branches !== 'object' || branches === null || Array.isArray(branches))
    throw new ConfigurationError(`${what} needs an object of branches, got ${describeValue(branches)}: ${example}.`);
  const entries = Object.entries(branches);
  if (entries.length === 0) throw new ConfigurationError(`${what} has no branches: give at least one, e.g. ${example}.`);
  return entries.map(([key, branch]) => {
    if (typeof branch !== 'object' || branch === null || !(BRANCH in branch)) {
      throw new ConfigurationError(
        `Branch "${key}" of ${what} is ${describeValue(branch)}, not a branch: make it with step.signal(name), step.timer(duration), step.child(workflow, input) or step.event(name).`,
      );
    }
    return [key, branch as unknown as RaceBranchSpec];
  });
}
