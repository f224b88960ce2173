import type { Clock } from '../definition/clock';
import type { RedflowLogger } from '../definition/logger';
import type { RunEventsOptions } from '../definition/run-events';
import type {
  CountRunsOptions,
  EmitEventOptions,
  GetRunEventOptions,
  ListRunsOptions,
  PruneOptions,
  RunOptions,
  WaitForRunOptions,
} from '../definition/run-options';
import { TERMINAL_STATUSES } from '../definition/run-types';
import type { AttemptState, RunHandle, RunOutcome, RunState, RunStatus, RunSummary, StepState } from '../definition/run-types';
import type { CronState, ScheduleOptions, ScheduleState } from '../definition/schedule-types';
import type { SignalDefinition } from '../definition/signal-definition';
import type { QueueStats, QueueStatsOptions, RunStats, WorkerInfo } from '../definition/stats-types';
import type { GuardedTracing } from '../definition/tracing';
import type { WorkflowDefinition, WorkflowRegistry } from '../definition/workflow';
import type { WorkflowMeta } from '../definition/workflow-types';
import { openConnection } from '../store/connection';
import type { RedflowKeys } from '../store/keys';
import type { RedisHealth } from '../store/redis-health';
import type { RedisConnection, RedisScripts } from '../store/redis-scripts';
import { ClientContext, type ClientOptions } from './client-context';
import { RunProducer } from './producer';
import { syncRegistry, type SyncRegistryOptions } from './registry-sync';
import { RunControl } from './run-control';
import { RunEventStreams, type RunEventStream } from './run-events-reader';
import { RunReader } from './run-reader';
import { RunWaiter } from './run-waiter';

export { CLIENT_OPTION_KEYS, DEFAULT_COMMAND_TIMEOUT_MS, newRunId, type ClientOptions } from './client-context';

/**
 * Starts, inspects and cancels runs. Create one with `createClient`. Each method hands over to the
 * part that owns its concept (producer, reader, waiter, control, event streams, registry sync),
 * all sharing one `ClientContext`: connection, keys, scripts, store queries and limits.
 */
export class WorkflowClient {
  /** @internal What every part of the client shares: connection, keys, scripts, store queries, limits. */
  readonly context: ClientContext;
  readonly keys: RedflowKeys;
  /** @internal */
  readonly scripts: RedisScripts;
  readonly registry: WorkflowRegistry;
  readonly maxPayloadBytes: number;
  /** How long a call waits for Redis before rejecting with RedisUnavailableError. */
  readonly commandTimeoutMs: number;
  /** Up, unreachable or refusing writes: shared with this client's worker. */
  readonly health: RedisHealth;
  readonly logger: RedflowLogger;
  /** The source of workflow time, shared with this client's worker. */
  readonly clock: Clock;
  /** The event stream's MAXLEN the scripts trim to; 0 when the stream is off (`events: false`). */
  readonly eventsMaxLen: number;
  /** @internal The `tracing` option, guarded; undefined when tracing is off. */
  readonly tracing: GuardedTracing | undefined;
  private readonly reader: RunReader;
  private readonly waiter: RunWaiter;
  private readonly producer: RunProducer;
  private readonly control: RunControl;
  private readonly streams: RunEventStreams;

  constructor(
    readonly redis: RedisConnection,
    ownsConnection: boolean,
    options: ClientOptions,
  ) {
    const context = new ClientContext(redis, ownsConnection, options);
    this.context = context;
    ({ keys: this.keys, scripts: this.scripts, registry: this.registry, maxPayloadBytes: this.maxPayloadBytes } = context);
    ({ commandTimeoutMs: this.commandTimeoutMs, health: this.health, logger: this.logger, clock: this.clock } = context);
    ({ eventsMaxLen: this.eventsMaxLen, tracing: this.tracing } = context);
    this.reader = new RunReader(context);
    this.waiter = new RunWaiter(context, (id) => this.reader.getRun(id));
    this.producer = new RunProducer(context, this.waiter);
    this.control = new RunControl(context, this.waiter);
    this.streams = new RunEventStreams(context);
  }

  /** True when a run status is final. */
  static isTerminal(status: RunStatus): boolean {
    return TERMINAL_STATUSES.has(status);
  }

  /** Checks Redis's `maxmemory-policy` once, before the first call: a warning (`requireNoEviction`: an error) when it lets Redis delete keys. */
  ready(): Promise<void> {
    return this.context.ready();
  }

  /**
   * Closes what the client opened: its event streams, the subscriber that waits for run ends (the
   * waits still pending reject with `ClientClosedError`), and the connection if this client opened
   * it. Safe to call twice.
   */
  async close(): Promise<void> {
    await this.waiter.close();
    await this.streams.close();
    await this.context.close();
  }

  /** Starts a run of a defined workflow. Validates input first: nothing is stored when it fails. */
  start<TInput, TOutput>(definition: WorkflowDefinition<TInput, TOutput>, input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>> {
    return this.producer.start(definition, input, options);
  }

  /**
   * Starts a run by workflow name. A workflow in this client's registry is validated locally; any
   * other must have been registered in Redis by a worker, else `UnknownWorkflowError`.
   */
  runByName<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    return this.producer.runByName<TOutput>(name, input, options);
  }

  /**
   * Starts several runs of one workflow (`items`: `{ input, options? }`). Every item is checked
   * before the first run is stored (one bad item stores nothing; its error names its index), then
   * all are sent together; a Redis failure part-way can leave earlier items stored (give them
   * idempotency keys to retry safely). Resolves with the handles, in the items' order.
   */
  runManyByName<TOutput = unknown>(name: string, items: ReadonlyArray<{ input: unknown; options?: RunOptions }>): Promise<Array<RunHandle<TOutput>>> {
    return this.producer.runManyByName<TOutput>(name, items);
  }

  /** @deprecated Use `runByName`, the same call (`emitWorkflow` is `step`'s "start without waiting"); it goes in the next minor version. */
  emitWorkflow<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    return this.producer.runByName<TOutput>(name, input, options);
  }

  /**
   * Emits an event: each workflow subscribed to it (`event: [{ name }]`) gets a run with the payload
   * as input. Returns their run ids (`[]` for a future `emitAt`); a repeated `idempotencyKey`, the same runs.
   */
  emitEvent(event: string, payload: unknown, options: EmitEventOptions = {}): Promise<string[]> {
    return this.producer.emitEvent(event, payload, options);
  }

  /** Emits an event at a later time; same as `emitEvent(event, payload, { emitAt, ... })`. */
  scheduleEvent(event: string, payload: unknown, options: EmitEventOptions & { emitAt: Date | number }): Promise<string[]> {
    return this.producer.scheduleEvent(event, payload, options);
  }

  /**
   * Adds a schedule, stored in Redis: a run of `workflow` with `input` on every tick of `cron` (a
   * croner expression, in `timezone`) or `every` interval (at least 1 s), once per tick across all
   * workers. Scheduling an id again replaces it (an unchanged one keeps its next tick). A workflow
   * of this client's registry is checked here (its input schema too); any other must be registered
   * in Redis by a worker, else `UnknownWorkflowError`. Resolves with the schedule.
   */
  schedule(id: string, options: ScheduleOptions): Promise<ScheduleState> {
    return this.producer.schedule(id, options);
  }

  /** Removes the schedule `id` added by `schedule()`; the runs it started stay. False when there was none. */
  unschedule(id: string): Promise<boolean> {
    return this.producer.unschedule(id);
  }

  /** A handle for an existing run id. */
  handle<TOutput = unknown>(id: string): RunHandle<TOutput> {
    return this.waiter.handle<TOutput>(id);
  }

  /**
   * Waits for a run to end, without polling: resolves with its output, rejects with its error
   * (`CanceledError` when canceled); `throwOnFailure: false` resolves with the final state instead.
   * `TimeoutError` after `timeout`, the signal's reason when `signal` aborts, `RunNotFoundError`
   * for no such run. Without `timeout`, a Redis silent for `commandTimeout` rejects it with
   * `RedisUnavailableError`; with it, the wait rides out the outage until then. Cost: one read,
   * then the run's end message (it carries results up to 64 KiB). See RunEndWatcher.
   */
  waitForRun<TOutput = unknown>(id: string, options: WaitForRunOptions & { throwOnFailure: false }): Promise<RunOutcome<TOutput>>;
  waitForRun<TOutput = unknown>(id: string, options?: WaitForRunOptions & { throwOnFailure?: true }): Promise<TOutput>;
  waitForRun<TOutput = unknown>(id: string, options?: WaitForRunOptions): Promise<TOutput | RunOutcome<TOutput>> {
    return this.waiter.waitForRun<TOutput>(id, options);
  }

  /**
   * The value the run published under `key` with `ctx.setEvent` (the latest one). Waits until it
   * exists, for at most `timeout` (default 60 s), and returns `null` when it does not exist by
   * then or the run ended without it. `RunNotFoundError` when the run does not exist.
   */
  getRunEvent<T = unknown>(runId: string, key: string, options: GetRunEventOptions = {}): Promise<T | null> {
    return this.waiter.getRunEvent<T>(runId, key, options);
  }

  /** A run, or null when it does not exist. */
  getRun<TOutput = unknown>(id: string): Promise<RunState<TOutput> | null> {
    return this.reader.getRun<TOutput>(id);
  }

  /** A run's stored steps, in the order they were stored. */
  getRunSteps(id: string): Promise<StepState[]> {
    return this.reader.getRunSteps(id);
  }

  /** A run's attempts, oldest first: how each ended and its error (a retried run's errors are here, not on `getRun`). */
  getRunAttempts(id: string): Promise<AttemptState[]> {
    return this.reader.getRunAttempts(id);
  }

  /** Ids of the child runs a run waits or waited on (`step.runWorkflow`). */
  getRunChildren(id: string): Promise<string[]> {
    return this.reader.getRunChildren(id);
  }

  /**
   * Runs, newest first, filtered by workflow and/or status. Running runs come first, queued and
   * scheduled runs sort by creation time, ended runs by finish time. Filtered by workflow alone,
   * runs sort by creation time; filtered by workflow and status, as that status sorts, except
   * running runs, which sort by creation time too. Each page reads one index and only its runs.
   */
  listRuns(options: ListRunsOptions = {}): Promise<RunState[]> {
    return this.reader.listRuns(options);
  }

  /**
   * Like `listRuns` (same filters, paging and order), but reads only what a list row shows: never
   * input, output or step records. A run whose stored fields cannot be read comes back as a
   * `CorruptRunSummary` (with `corrupt` set) instead of failing the page.
   */
  listRunSummaries(options: ListRunsOptions = {}): Promise<RunSummary[]> {
    return this.reader.listRunSummaries(options);
  }

  /**
   * How many runs there are, filtered by workflow and/or status, as the indexes `listRuns` reads
   * count them: one `ZCARD` (workflow and status, an ended status, or running), else the `ZCARD`s
   * of the indexes whose union the filter is (a workflow's nine; a live status's, one per
   * workflow) added up in one round trip. O(1) in Redis per index whatever the number of runs.
   */
  countRuns(options: CountRunsOptions = {}): Promise<number> {
    return this.reader.countRuns(options);
  }

  /**
   * The depth of each queue: queued, scheduled and running runs, and when its oldest queued run
   * became claimable. Cheap enough to call on every metrics scrape or health check: two round
   * trips for the registry and the counts (LLEN, ZCARD, a short LRANGE per queue, one ZCARD per
   * registered workflow), one for the head runs; no scan of the runs.
   */
  getQueueStats(options: QueueStatsOptions = {}): Promise<QueueStats[]> {
    return this.reader.getQueueStats(options);
  }

  /**
   * Counts for an overview: runs per status, runs per workflow (as indexed), and runs that
   * succeeded or failed in each of the last `minutes` minutes (oldest first).
   */
  getStats(options: { minutes?: number } = {}): Promise<RunStats> {
    return this.reader.getStats(options);
  }

  /** The live workers (seen within 3 heartbeats): host, pid, queues, versions, concurrency, active runs. */
  listWorkers(): Promise<WorkerInfo[]> {
    return this.reader.listWorkers();
  }

  /** Workflows registered in Redis by workers (or `syncRegistry`). */
  listWorkflows(): Promise<WorkflowMeta[]> {
    return this.reader.listWorkflows();
  }

  /** A workflow registered in Redis, with the versions workers serve; null when it is not registered. */
  getWorkflowMeta(name: string): Promise<WorkflowMeta | null> {
    return this.reader.getWorkflowMeta(name);
  }

  /**
   * True when runs of `workflow` started on `version` are queued, scheduled (waiting included),
   * running or compensating. Two round trips whatever the backlog: it reads the 1,000 oldest runs
   * of each of those statuses, where the runs of an older version sit (they were created before
   * the newer version's), so a pinned run of an old version behind a newer backlog may be missed.
   */
  hasUnfinishedRuns(workflow: string, version: number): Promise<boolean> {
    return this.reader.hasUnfinishedRuns(workflow, version);
  }

  /**
   * Cron schedules registered in Redis, with their next tick: the `cron` triggers of workflow
   * definitions (`source: 'definition'`) and the schedules of `schedule()` (`source: 'runtime'`).
   */
  listCrons(): Promise<CronState[]> {
    return this.reader.listCrons();
  }

  /** The schedules added by `schedule()`, by id, with their next tick. */
  listSchedules(): Promise<ScheduleState[]> {
    return this.reader.listSchedules();
  }

  /**
   * The run events of this prefix, as they happen (`{prefix}:events`, written by the scripts of
   * every client and worker whose `events` option is on): an async iterable that also closes with
   * `break`, `await using` or `close()`. It reads on a connection of its own, holds at most
   * `bufferSize` events (it stops reading Redis while the consumer is slow), and after a Redis
   * outage goes on after the last event it read. Filters apply in this process.
   */
  events(options?: RunEventsOptions): RunEventStream {
    return this.streams.events(options);
  }

  /**
   * Cancels a run that has not ended. Queued and scheduled runs end at once; a running run's signal
   * aborts and no later step starts. Returns false when the run already ended, is compensating or
   * does not exist. With `compensate: true`, a run with completed steps that have `compensate`
   * functions becomes `compensating`: a worker runs them in reverse order, then it ends `canceled`
   * with `compensated: true` (its unfinished children alike).
   */
  cancelRun(id: string, options: { reason?: string; compensate?: boolean } = {}): Promise<boolean> {
    return this.control.cancelRun(id, options);
  }

  /**
   * Ends a run at once, as `terminated`: not cooperative like `cancelRun`, and nothing of the
   * workflow runs after it (no `onFailure`, no compensation). A running attempt's `AbortSignal`
   * aborts with `RunTerminatedError` and no later step starts; the unfinished children it waits on
   * are terminated too, and parents waiting on it get a failed step (`RunTerminatedError`).
   * Resolves `true` when this call terminated it, `false` when the run had already ended (its status
   * is unchanged); throws `RunNotFoundError` when there is no such run.
   */
  terminate(id: string, options: { reason?: string } = {}): Promise<boolean> {
    return this.control.terminate(id, options);
  }

  /**
   * Starts a new run of an ended run's workflow with the same input, queue, attempts and
   * flow-control keys (mutex, throttle, rate limit) and timeout. Returns its handle.
   */
  rerun<TOutput = unknown>(id: string): Promise<RunHandle<TOutput>> {
    return this.control.rerun<TOutput>(id);
  }

  /**
   * Restarts a failed, canceled or terminated run in place, under the same id, from its first incomplete step:
   * steps that succeeded are not run again (the replay returns their stored outputs), failed ones
   * are. Attempts count on (the next is the last one + 1) with a fresh budget of the workflow's
   * `maxAttempts`, and the run queues like a new one, so its mutex, concurrency, throttle and rate
   * limit apply. Resolves `true` when queued, `false` when the run does not exist; throws
   * `RunNotResumableError` when it is queued, scheduled, running or succeeded.
   */
  resume(id: string): Promise<boolean> {
    return this.control.resume(id);
  }

  /** Sends a signal (a name, or a `defineSignal` definition: payload typed and validated) to a run, or buffers it for
   * its next wait on that name (1,000 at most: `SignalBufferFullError`). `false` when the run has ended or does not exist. */
  signal(runId: string, name: string, payload?: unknown): Promise<boolean>;
  signal<T>(runId: string, signal: SignalDefinition<T>, payload: T): Promise<boolean>;
  signal(runId: string, signal: string | SignalDefinition, payload: unknown = null): Promise<boolean> {
    return this.control.signal(runId, signal, payload);
  }

  /**
   * Deletes one ended run and everything it owns (step records, index entries, idempotency key,
   * children, waiters and signals), as retention does. A run that has not ended is refused with
   * `RunNotEndedError` and left as it was, unless `force: true`: then it is terminated (as
   * `terminate` does, children included) and deleted in one atomic call. Resolves `true` when
   * deleted, `false` when there is no such run.
   */
  deleteRun(id: string, options: { force?: boolean } = {}): Promise<boolean> {
    return this.control.deleteRun(id, options);
  }

  /**
   * Deletes ended runs (`statuses`, by default succeeded, failed, canceled and terminated) that finished more
   * than `olderThan` ago, each with everything it owns (step records, index entries, idempotency
   * key, children and waiters sets), as retention does; with `workflow`, only that workflow's.
   * Runs that have not ended are never deleted. Works in atomic batches of 500 runs, oldest first,
   * until none is left, and resolves with the number of runs deleted.
   */
  prune(options: PruneOptions): Promise<{ deleted: number }> {
    return this.control.prune(options);
  }

  /**
   * Records the registry's workflows in Redis under `owner` (queue, limits, event subscriptions,
   * cron schedules), and removes what this owner registered before but no longer defines (unless
   * `prune: false`). Returns the removed workflow names.
   */
  syncRegistry(registry: WorkflowRegistry, options: SyncRegistryOptions): Promise<string[]> {
    return syncRegistry(this.context, registry, options);
  }

  /**
   * Builds the (workflow, status) index `listRuns` reads for runs stored before it existed (each
   * worker calls it at start; see RunReader.backfillRunIndex). `force` builds it again, after a
   * rolling deploy from workers older than the index. Returns `built`, `done`, `busy` or `stopped`.
   */
  backfillRunIndex(options: { force?: boolean; stopped?: () => boolean } = {}): Promise<'built' | 'done' | 'busy' | 'stopped'> {
    return this.reader.backfillRunIndex(options);
  }
}

/** Creates a client: `createClient({ url })`, `createClient({ redis })`, plus `prefix`, `registry`. */
export function createClient(options: ClientOptions = {}): WorkflowClient {
  const { redis, owned } = openConnection(options);
  return new WorkflowClient(redis, owned, options);
}
