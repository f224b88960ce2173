import type { Clock } from '../definition/clock';
import type { CheckedStepRetry } from '../definition/option-checks';
import type { GuardedSpan, GuardedTracing } from '../definition/tracing';
import type { WorkflowRegistry } from '../definition/workflow';
import type { Payloads } from '../store/payloads';
import type { RedisScripts } from '../store/redis-scripts';
import type { HookRunner } from './hook-runner';

/** What the step runtime needs from the attempt it belongs to. */
export interface AttemptContext {
  runId: string;
  workflow: string;
  token: string;
  attempt: number;
  leaseMs: number;
  /** Workflow time: due times of retries, waits and timeouts. */
  clock: Clock;
  /** @internal Test step mocks, consulted before a step's function is called. */
  stepMocks?: StepMocks;
  maxPayloadBytes: number;
  /** How payloads are stored (the client's `codec` option): step outputs are sealed and opened through it. */
  payloads: Payloads;
  /** A journal larger than this (bytes) is told once per run (`journalLarge`). */
  journalWarningBytes: number;
  /** The run was told large already (its hash has `journalLarge`). */
  journalWarned: boolean;
  /** Tells that the run's journal passed `journalWarningBytes`: a warning and the `onJournalLarge` hook. */
  journalLarge(bytes: number): void;
  /** How a step that sets no `retries` retries: the workflow's `stepRetries`, else the worker's default. */
  stepRetries: CheckedStepRetry;
  scripts: RedisScripts;
  /** Workflows known here: child runs of these are validated before they start. */
  registry: WorkflowRegistry;
  /** Why the attempt must stop (canceled, or the worker lost the run), once it must. */
  stopReason(): Error | undefined;
  /** Sends a call that must reach Redis, waiting out outages (see RunExecutor). */
  call<T>(fn: () => Promise<T>): Promise<T>;
  /**
   * Before a step's function runs: undefined while the lease is surely still held, else a promise
   * that renews it and rejects when it was lost (see RunExecutor.confirmLease).
   */
  confirmLease(): Promise<void> | undefined;
  /** Called when a checkpoint finds the run canceled or taken over. */
  onLost(code: 'canceled' | 'terminated' | 'lost'): void;
  /** The worker's lifecycle hooks (onStepStart, onStepComplete, onStepFailed). */
  hooks: HookRunner;
  /** Tracing, when on: child runs store the active trace context. */
  tracing?: GuardedTracing;
  /** The attempt's span, when tracing is on: each try of a step.run function gets a child span. */
  span?: GuardedSpan;
}

/** @internal What a mocked step does instead of calling its function (`nestjs-redflow/testing`). */
export type StepMock = { output: unknown } | { error: unknown };

/** @internal Looks up the mock of a step of a run, by the run id and the step name. */
export type StepMocks = (runId: string, stepName: string) => StepMock | undefined | Promise<StepMock | undefined>;
