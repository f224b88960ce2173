import type { Clock } from '../definition/clock';
import type { RedflowLogger } from '../definition/logger';
import type { CheckedStepRetry } from '../definition/option-checks';
import type { GuardedTracing } from '../definition/tracing';
import type { WorkflowRegistry } from '../definition/workflow';
import type { Payloads } from '../store/payloads';
import type { RedisHealth } from '../store/redis-health';
import type { RedisScripts } from '../store/redis-scripts';
import type { HookRunner } from './hook-runner';
import type { StepMocks } from './step-runtime';

/** An attempt as the lease renewal sees it. */
export interface LeasedAttempt {
  readonly runId: string;
  readonly token: string;
  /** The lease was renewed until `until` (ms, real time). */
  leaseRenewed(until: number): void;
  /** The run was terminated, or another worker holds it now. */
  lost(code: 'canceled' | 'terminated' | 'lost'): void;
}

/** What an executor needs from its worker. */
export interface ExecutorHost {
  readonly app: string;
  readonly scripts: RedisScripts;
  readonly registry: WorkflowRegistry;
  readonly leaseMs: number;
  /** Workflow time (due times); leases use real time. */
  readonly clock: Clock;
  /** @internal Test step mocks (`nestjs-redflow/testing`). */
  readonly stepMocks?: StepMocks;
  readonly maxPayloadBytes: number;
  /** How payloads are stored: the client's `codec` option (store/payloads.ts). */
  readonly payloads: Payloads;
  /** Step retries of workflows that set no `stepRetries` (the `defaultStepRetries` option). */
  readonly defaultStepRetries: CheckedStepRetry;
  /** The `journalWarningBytes` option. */
  readonly journalWarningBytes: number;
  readonly logger: RedflowLogger;
  /** Whether a run that ends failed or compensation_failed here is logged (the `logFailedRuns` option). */
  readonly logFailedRuns: boolean;
  /** False while the worker is stopping: finishing then claims no next run. */
  readonly claiming: boolean;
  /** Per list, the workflows whose runs a claim leaves there for another version; finishing a run of such a list claims no next run (the queue loop's claim does). */
  readonly claimSkips: ReadonlyMap<string, readonly string[]>;
  /** A lease token no other claim has used: the worker's id and a counter. */
  nextLeaseToken(): string;
  /** Called after a run was scheduled (retry, wait), so the worker can promote it on time. */
  runScheduled(queue: string, dueAt: number): void;
  /** Whether Redis is up; outages are reported to it. */
  readonly health: RedisHealth;
  /** The worker's lifecycle hooks. */
  readonly hooks: HookRunner;
  /** Resolves when Redis is healthy again, or the worker stopped for good. */
  waitForRedis(): Promise<void>;
  /** Renews this attempt's lease now (a heartbeat of this run alone); tells the executor if it is lost. */
  renewLease(attempt: LeasedAttempt): Promise<void>;
  /** An attempt found its lease gone (taken over or canceled). */
  leaseLost(runId: string, attemptStartedAt: number): void;
  /** Tracing, when on: a span per attempt, child of the trace context stored with the run. */
  readonly tracing?: GuardedTracing;
  /** The queue of the latest registered version of a workflow (its registry entry), or null. */
  latestQueue(workflow: string): Promise<string | null>;
  /**
   * A run of a version this worker does not have was claimed from `list` (its workflow was defined
   * after the worker started): it is handed back (warned once), and later claims leave such runs.
   */
  versionMismatch(list: string, workflow: string, runVersion: number, ownVersion: number): void;
}
