/**
 * The names of every option object's keys, checked by the compiler against its interface (see
 * `optionKeys`): what `assertKnownKeys` accepts, and offers in its messages.
 */
import type { CountRunsOptions, EmitEventOptions, ListRunsOptions, PruneOptions, RunOptions } from './run-options';
import type { ScheduleOptions } from './schedule-types';
import type { QueueStatsOptions } from './stats-types';
import type {
  ChildRunOptions,
  EmitEventStepOptions,
  RaceChildOptions,
  RaceEventOptions,
  RunStepOptions,
  StepOptions,
  StepRetryPolicy,
  WaitForEventOptions,
  WaitForSignalOptions,
} from './step-types';
import type { InputSchema } from './validation';
import type {
  BatchOptions,
  CancelOnTrigger,
  ConcurrencyOptions,
  CronTrigger,
  DebounceOptions,
  EventTrigger,
  LimitOptions,
  RetryPolicy,
  WorkflowOptions,
} from './workflow-types';

/**
 * Returns a function that returns its argument, an array of option names, and fails to compile
 * ("An argument for 'missing' was not provided") unless the array lists every key of `T`. So a new
 * option added to an interface cannot be forgotten here and then rejected as unknown at runtime.
 */
export function optionKeys<T>() {
  return <const K extends readonly (keyof T & string)[]>(
    keys: K,
    ..._complete: [Exclude<keyof T, K[number]>] extends [never] ? [] : [missing: Exclude<keyof T, K[number]>]
  ): K => keys;
}

/** Keys of `WorkflowOptions` (the options of `defineWorkflow`). */
export const WORKFLOW_OPTION_KEYS = optionKeys<WorkflowOptions<InputSchema | undefined, unknown>>()([
  'queue',
  'version',
  'onNonDeterminism',
  'maxAttempts',
  'retries',
  'stepRetries',
  'schema',
  'onFailure',
  'maxConcurrency',
  'debounce',
  'throttle',
  'rateLimit',
  'mutex',
  'concurrency',
  'priority',
  'event',
  'batch',
  'cron',
  'cancelOn',
  'timeout',
]);

/** Keys of `BatchOptions`. */
export const BATCH_KEYS = optionKeys<BatchOptions>()(['maxSize', 'timeout', 'key']);

/** Keys of `ConcurrencyOptions`. */
export const CONCURRENCY_KEYS = optionKeys<ConcurrencyOptions>()(['key', 'limit', 'scope']);

/** Keys of a `cancelOn` item. */
export const CANCEL_ON_KEYS = optionKeys<CancelOnTrigger>()(['event', 'match']);

/** Keys of `WaitForEventOptions` (`step.waitForEvent`). */
export const WAIT_FOR_EVENT_OPTION_KEYS = optionKeys<WaitForEventOptions>()(['match', 'timeout']);

/** Keys of `RetryPolicy` (the `retries` option). */
export const RETRY_POLICY_KEYS = optionKeys<RetryPolicy>()(['maxAttempts', 'delay', 'shouldRetry']);

/** Keys of `DebounceOptions` (the `debounce` option). */
export const DEBOUNCE_KEYS = optionKeys<DebounceOptions>()(['period', 'timeout', 'key']);

/** Keys of `LimitOptions` (the `throttle` and `rateLimit` options). */
export const LIMIT_KEYS = optionKeys<LimitOptions>()(['limit', 'period', 'key']);

/** The policies and bounds a workflow's trigger and a runtime schedule both take. */
const SCHEDULE_POLICY_KEYS = ['missed', 'missedLimit', 'overlap', 'startAt', 'endAt', 'limit', 'priority'] as const;

/** Keys of `CronTrigger` (an item of the `cron` option). */
export const CRON_TRIGGER_KEYS = optionKeys<CronTrigger>()(['id', 'expression', 'timezone', 'rrule', 'input', ...SCHEDULE_POLICY_KEYS]);

/** Keys of `EventTrigger` (an item of the `event` option). */
export const EVENT_TRIGGER_KEYS = optionKeys<EventTrigger>()(['name']);

/** Keys of `StepOptions` (`step.run`, `step.waitFor`, `@Step`). */
export const STEP_OPTION_KEYS = optionKeys<StepOptions>()(['name', 'timeout', 'timeoutMs']);

/** Keys of `RunStepOptions` (`step.run`, `@Step`). */
export const RUN_STEP_OPTION_KEYS = optionKeys<RunStepOptions>()([
  'name',
  'timeout',
  'timeoutMs',
  'retries',
  'heartbeatTimeout',
  'compensate',
  'compensateRetries',
  'sandbox',
]);

/** Keys of `StepRetryPolicy` (the `retries` of a step). */
export const STEP_RETRY_KEYS = optionKeys<StepRetryPolicy>()(['maxAttempts', 'backoff', 'delay', 'maxDelay', 'jitter']);

/** Keys of `ChildRunOptions` (`step.runWorkflow`, `step.emitWorkflow`). */
export const CHILD_RUN_OPTION_KEYS = optionKeys<ChildRunOptions>()([
  'name',
  'timeout',
  'timeoutMs',
  'runAt',
  'idempotencyKey',
  'idempotencyWindow',
  'idempotencyTtl',
  'priority',
]);

/** Keys of `EmitEventStepOptions` (`step.emitEvent`). */
export const EMIT_EVENT_STEP_OPTION_KEYS = optionKeys<EmitEventStepOptions>()(['name', 'emitAt']);

/** Keys of `RaceChildOptions` (`step.child`). */
export const RACE_CHILD_OPTION_KEYS = optionKeys<RaceChildOptions>()(['onLose']);

/** Keys of `RaceEventOptions` (`step.event`). */
export const RACE_EVENT_OPTION_KEYS = optionKeys<RaceEventOptions>()(['match']);

/** Keys of `WaitForSignalOptions`. */
export const WAIT_FOR_SIGNAL_OPTION_KEYS = optionKeys<WaitForSignalOptions>()(['timeout']);

/** Keys of `RunOptions` (starting a run). */
export const RUN_OPTION_KEYS = optionKeys<RunOptions>()([
  'idempotencyKey',
  'idempotencyWindow',
  'idempotencyTtl',
  'runAt',
  'queueOverride',
  'timeout',
  'version',
  'priority',
]);

/** Keys of `EmitEventOptions`. */
export const EMIT_EVENT_OPTION_KEYS = optionKeys<EmitEventOptions>()(['idempotencyKey', 'idempotencyWindow', 'idempotencyTtl', 'emitAt']);

/** Keys of `ListRunsOptions`. */
export const LIST_RUNS_OPTION_KEYS = optionKeys<ListRunsOptions>()(['workflow', 'status', 'version', 'waiting', 'limit', 'offset']);

/** Keys of `QueueStatsOptions` (`getQueueStats`). */
export const QUEUE_STATS_OPTION_KEYS = optionKeys<QueueStatsOptions>()(['queues']);

/** Keys of `CountRunsOptions`. */
export const COUNT_RUNS_OPTION_KEYS = optionKeys<CountRunsOptions>()(['workflow', 'status', 'version', 'waiting']);

/** Keys of `PruneOptions`. */
export const PRUNE_OPTION_KEYS = optionKeys<PruneOptions>()(['olderThan', 'statuses', 'workflow']);

/** Keys of `ScheduleOptions` (`client.schedule`). */
export const SCHEDULE_OPTION_KEYS = optionKeys<ScheduleOptions>()(['workflow', 'cron', 'every', 'rrule', 'input', 'timezone', ...SCHEDULE_POLICY_KEYS]);
