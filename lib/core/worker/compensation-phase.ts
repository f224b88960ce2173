import { validateInput } from '../definition/validation';
import type { RunInfo } from '../definition/workflow';
import type { WorkflowDefinition } from '../definition/workflow-types';
import type { ClaimedRun } from '../store/redis-scripts';
import { deserializeError } from '../store/serialization';
import type { AttemptFinisher } from './attempt-finisher';
import type { AttemptState } from './attempt-state';
import { dueCompensations, runCompensations } from './compensations';
import { StepRuntime, type AttemptContext } from './step-runtime';

/** What the compensation phase needs from the attempt that holds the run. */
export interface CompensatingAttempt {
  readonly runId: string;
  readonly state: AttemptState;
  readonly finisher: AttemptFinisher;
  /** The step runtime's context for this attempt, with `stopReason` as its stop reason. */
  attemptContext(info: RunInfo, stopReason: () => Error | undefined): AttemptContext;
  /** Calls the workflow's handler with the step API of `steps`. */
  runHandler(definition: WorkflowDefinition, steps: StepRuntime, info: RunInfo, input: unknown): Promise<unknown>;
}

/** The run being compensated: why it failed (`reasonJson`), what it ends as, and its journal. */
export interface CompensationPhase {
  definition: WorkflowDefinition;
  info: RunInfo;
  input: unknown;
  /** The error the run failed with, as stored. */
  reasonJson: string;
  /** What the run ends as once every compensation ran. */
  target: 'failed' | 'canceled';
  journal: Map<string, string>;
}

/**
 * The compensation phase (saga), with the lease held and the run `compensating`: replays the
 * handler over the journal without running anything new, to collect the compensate functions of
 * the completed steps, then runs the due ones in reverse order of completion and ends the run.
 * A run that timed out compensates all the same: only being halted (canceled, lost) stops it.
 */
export async function compensate(attempt: CompensatingAttempt, phase: CompensationPhase): Promise<ClaimedRun | null> {
  const { definition, info, input, reasonJson, target, journal } = phase;
  const halted = () => attempt.state.halted;
  const signal = attempt.state.compensationSignal();
  const context = attempt.attemptContext(info, halted);
  const replay = new StepRuntime(context, journal, true);
  try {
    const validInput = await validateInput(info.workflow, definition.options.schema, input);
    await attempt.runHandler(definition, replay, info, validInput).catch(() => undefined);
    await replay.settled();
    // Parallel branches go on after the first one stops: let them reach their completed steps.
    for (let turn = 0, seen = -1; turn < 50 && seen !== replay.compensations.size; turn++) {
      seen = replay.compensations.size;
      await new Promise((resolve) => setImmediate(resolve));
    }
    const due = dueCompensations(attempt.runId, journal, context.payloads);
    const result = await runCompensations({ ...context, signal }, due, replay.compensations, deserializeError(reasonJson));
    return await attempt.finisher.endCompensation(target, reasonJson, result, info, input);
  } catch (error) {
    if (attempt.state.halted || attempt.state.abandoned) return null;
    return attempt.finisher.endCompensation(target, reasonJson, { ok: false, ran: [], step: '', error }, info, input);
  }
}
