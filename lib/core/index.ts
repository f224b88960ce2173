export * from './errors';
export { toMs, type Duration } from './definition/duration';
export { systemClock, type Clock } from './definition/clock';
export { createClient, WorkflowClient, type ClientOptions } from './client/workflow-client';
export type {
  CountRunsOptions,
  EmitEventOptions,
  GetRunEventOptions,
  ListRunsOptions,
  PruneOptions,
  RunOptions,
  WaitingFilter,
} from './definition/run-options';
export type { ResultOptions, RunHandle } from './definition/run-types';
export type { ScheduleOptions, SchedulePolicies } from './definition/schedule-types';
export { createAdmin, WorkflowAdmin } from './client/admin';
export { createQueues, WorkflowQueues, type QueuePauseOptions } from './client/queues';
export { createSchedules, MAX_BACKFILL_TICKS, WorkflowSchedules, type ScheduleFireResult, type ScheduleSource } from './client/schedules';
export { RunEventStream } from './client/run-events-reader';
export {
  RUN_EVENT_TYPES,
  DEFAULT_EVENTS_MAX_LEN,
  type EventStreamOptions,
  type RunEvent,
  type RunEventType,
  type RunEventsOptions,
  type RunWaitingFor,
} from './definition/run-events';
export type { ConnectionOptions } from './store/connection';
export type { RedisConnection } from './store/redis-scripts';
export { Worker, type WorkerOptions, type WorkerRuntimeOptions, type WorkerStopOptions, type WorkerLiveness } from './worker/worker';
export { startWorker } from './worker/start-worker';
export { defineSignal, type SignalDefinition } from './definition/signal-definition';
export {
  defineWorkflow,
  getDefaultRegistry,
  setDefaultClient,
  WorkflowRegistry,
  type ChildRunOptions,
  type CronTrigger,
  type DebounceOptions,
  type EmitEventStepOptions,
  type EventTrigger,
  type KeyFrom,
  type LimitOptions,
  type RetryPolicy,
  type WorkflowTarget,
  type NamedWorkflow,
  type RunInfo,
  type StepApi,
  type StepOptions,
  type RunStepOptions,
  type CompensationContext,
  type CompensationOutcome,
  type StepRetryPolicy,
  type SandboxStepContext,
  type StepRunContext,
  type WaitForSignalOptions,
  type WaitForEventOptions,
  type RaceBranch,
  type RaceChildOptions,
  type RaceEventOptions,
  type RaceResult,
  type CancelOnTrigger,
  type WorkflowContext,
  type WorkflowDefinition,
  type WorkflowHandler,
  type WorkflowOptions,
} from './definition/workflow';
export type { DtoClass, InferInput, InputSchema, StandardSchemaIssue, StandardSchemaResult, StandardSchemaV1 } from './definition/validation';
export { DEFAULT_MAX_PAYLOAD_BYTES } from './store/serialization';
export type { PayloadCodec, PayloadContext, PayloadKind } from './definition/payload-codec';
export { aesGcmCodec, aesGcmCodecFromEnv, generatePayloadKey, type AesGcmCodecOptions } from './definition/aes-gcm-codec';
export type { EncryptedPayload } from './store/payloads';
export type {
  AttemptState,
  CorruptRunSummary,
  EndedStatus,
  FinalStatus,
  IntactRunSummary,
  RunErrorSummary,
  RunOutcome,
  RunState,
  RunStatus,
  RunSummary,
  StepState,
  StoredError,
  WaitingFor,
  WaitKind,
} from './definition/run-types';
export type { WaitForRunOptions } from './definition/run-options';
export type { QueuePause, QueueStats, QueueStatsOptions, RunStats, WorkerInfo } from './definition/stats-types';
export type { CronState, ScheduleState } from './definition/schedule-types';
export type { RedflowLogger } from './definition/logger';
export type { WorkflowMeta } from './definition/workflow-types';
export { RUN_HOOK_EVENTS } from './definition/worker-hooks';
export type {
  JournalLargeEvent,
  RunCanceledEvent,
  RunCompleteEvent,
  RunFailedEvent,
  RunHookEvent,
  RunHookEventName,
  RunStartEvent,
  StepCompleteEvent,
  StepFailedEvent,
  StepHookEvent,
  WorkerErrorContext,
  WorkerHooks,
} from './definition/worker-hooks';
export type { RunStarter } from './definition/workflow-types';
export { checkTraceContext, MAX_TRACESTATE_CHARS } from './definition/tracing';
export type { AttemptTraceInfo, RedflowTracing, SpanOutcome, StepTraceInfo, TraceContext, TraceSpan } from './definition/tracing';
