import type { CheckedStepRetry } from '../definition/option-checks';
import type { CompensationContext } from '../definition/step-types';
import type { StepApi } from '../definition/workflow-types';
import type { StepTarget } from '../store/redis-scripts';
import type { AttemptContext } from './attempt-context';
import type { CheckpointWriter } from './checkpoint-writer';
import type { StepJournal } from './step-journal';

/** A compensation a step registered when it was reached: its function and retry policy. */
export interface RegisteredCompensation {
  fn: (output: unknown, ctx: CompensationContext) => unknown;
  retries: CheckedStepRetry;
}

/** A step whose function is running (or a step retry pausing in process); it can be stopped from outside. */
export interface InflightStep {
  controller?: AbortController;
  reject: (reason: unknown) => void;
}

/** Stops a running step: its signal aborts and its promise rejects, even if its function ignores the signal. */
export function stopStep(step: InflightStep, reason: unknown): void {
  step.controller?.abort(reason);
  step.reject(reason);
}

/**
 * What a step kind uses of the step runtime of its attempt (`StepRuntime` is the one
 * implementation). A step kind is a file under `steps/` of plain functions taking this as their
 * first argument, and one entry in the table of `steps/index.ts`.
 */
export interface StepHost {
  readonly ctx: AttemptContext;
  /** Names step calls, replays stored records, numbers new ones. */
  readonly replay: StepJournal;
  /** The records this attempt has not stored yet. */
  readonly writer: CheckpointWriter;
  /** The steps whose functions are running (and in-process retry pauses). */
  readonly inflight: Set<InflightStep>;
  /** The compensations of the steps reached so far, by step name. */
  readonly compensations: Map<string, RegisteredCompensation>;
  /** Before a step's effect: the attempt must go on, and every earlier step must be stored. */
  ready(): Promise<void>;
  /** The step a script call stores into: this attempt's lease, the field, and the next `seq`. */
  target(field: string): StepTarget;
  /** A script answered that the lease moved: stops the attempt. */
  lost(): never;
  /** Ends the attempt here: the run waits until `dueAt` (0 = until a child wakes it). */
  suspend(dueAt: number, waitField?: string): never;
  /** Records a step failure (the first one fails fast its running siblings) and throws it. */
  failAt(field: string, startedAt: number, error: unknown): never;
  /** Throws when the attempt stopped, waits or ended. */
  throwIfStopped(): void;
  /** Keeps a child start or an event emit until it settles (`settled()`). */
  track<T>(effect: Promise<T>): Promise<T>;
  /** Stores a run field that is not a step (progress, a published value) now. */
  setField(field: string, value: unknown, what: string, limit: number): Promise<void>;
  /** The run's journal as this attempt leaves it. */
  journal(): Map<string, string>;
}

/** How a member of the `step` API is made for one attempt: once per attempt, from its runtime. */
export type StepApiEntry<K extends keyof StepApi> = (rt: StepHost) => StepApi[K];
