import { policiesOf, scheduleIdOf, type StoredCron } from '../definition/cron';
import {
  assertKnownKeys,
  checkInteger,
  checkResourceName,
  checkWorkflowVersion,
  controlCharIndex,
  COUNT_RUNS_OPTION_KEYS,
  LIST_RUNS_OPTION_KEYS,
  QUEUE_STATS_OPTION_KEYS,
} from '../definition/option-checks';
import { type CountRunsOptions, type ListRunsOptions } from '../definition/run-options';
import { RUN_STATUSES, WAIT_KINDS, type AttemptState, type RunState, type RunSummary, type StepState, type WaitKind } from '../definition/run-types';
import { type CronState, type SchedulePolicies, type ScheduleState } from '../definition/schedule-types';
import { type QueueStats, type QueueStatsOptions, type RunStats, type WorkerInfo } from '../definition/stats-types';
import { type WorkflowMeta } from '../definition/workflow-types';
import { ConfigurationError } from '../errors';
import type { Payloads } from '../store/payloads';
import type { StoredCronEntry } from '../store/registry-queries';
import { RUN_INDEX_LEASE_MS, type RunFilter } from '../store/run-list-queries';
import { isRunStatus, parseRun, RUN_FIELDS, summarizeRun, SUMMARY_FIELDS } from '../store/run-record';
import { isPossibleRunId, type ClientContext } from './client-context';

/** Runs indexed per atomic call of the backfill (ZSCAN COUNT, so about this many). */
const RUN_INDEX_CHUNK = 500;

/** The workflow, status and version filters of a list or count call, checked. */
function checkRunFilter(options: CountRunsOptions, what: string, known: readonly string[]): RunFilter {
  assertKnownKeys(`${what} options`, options, known);
  if (options.status !== undefined && !isRunStatus(options.status)) {
    throw new ConfigurationError(`${what} status must be one of ${RUN_STATUSES.join(', ')}, got ${JSON.stringify(options.status)}.`);
  }
  if (options.workflow !== undefined && typeof options.workflow !== 'string') {
    throw new ConfigurationError(`${what} workflow must be a workflow name, got ${typeof options.workflow}.`);
  }
  if (options.version !== undefined) {
    checkWorkflowVersion(options.version, `${what} version`);
    if (!options.workflow)
      throw new ConfigurationError(`${what} version needs a workflow: versions are per workflow, as in { workflow: "checkout", version: 1 }.`);
  }
  const waiting = options.waiting === undefined ? undefined : checkWaiting(options.waiting, what);
  if (waiting && options.status !== undefined && options.status !== 'scheduled') {
    throw new ConfigurationError(
      `${what} waiting lists runs suspended in a step, which are "scheduled": leave status out or set it to "scheduled", got status ${JSON.stringify(options.status)}.`,
    );
  }
  return { workflow: options.workflow || undefined, status: options.status, version: options.version, ...(waiting ? { waiting } : {}) };
}

/** The `waiting` filter of a list or count call, checked: a wait kind, or `signal:<name>` / `event:<name>`. */
function checkWaiting(value: unknown, what: string): { kind: WaitKind; name?: string } {
  if (typeof value === 'string') {
    if ((WAIT_KINDS as readonly string[]).includes(value)) return { kind: value as WaitKind };
    const m = /^(signal|event):(.+)$/s.exec(value);
    if (m && controlCharIndex(m[2]) < 0) return { kind: m[1] as WaitKind, name: m[2] };
  }
  const shown = typeof value === 'string' ? JSON.stringify(value) : typeof value;
  throw new ConfigurationError(
    `${what} waiting must be one of ${WAIT_KINDS.map((k) => `"${k}"`).join(', ')}, "signal:<name>" or "event:<name>" (as in "signal:approve"), got ${shown}.`,
  );
}

/** The filters of a list call, checked, with their defaults. */
function checkListOptions(options: ListRunsOptions, what: string): RunFilter & { limit: number; offset: number } {
  const filter = checkRunFilter(options, what, LIST_RUNS_OPTION_KEYS);
  const limit = checkInteger(options.limit ?? 50, `${what} limit`, 0, 10_000);
  const offset = checkInteger(options.offset ?? 0, `${what} offset`, 0, 1_000_000_000);
  return { ...filter, limit, offset };
}

/** A stored cron as `listCrons` shows it. */
export function cronStateOf({ cronId, def, nextAt, paused }: StoredCronEntry, payloads: Payloads): CronState {
  const scheduleId = scheduleIdOf(cronId);
  return {
    id: scheduleId ?? cronId,
    source: scheduleId === undefined ? 'definition' : 'runtime',
    workflow: def.workflow,
    expression: def.expression,
    every: def.every,
    rrule: def.rrule,
    timezone: def.timezone ?? undefined,
    input: payloads.open(def.input, { kind: 'input' }),
    nextAt,
    ...withPolicies(def),
    ...(paused && { paused }),
  };
}

/** `{ policies }` of a stored schedule that has any, else nothing. */
function withPolicies(def: StoredCron): { policies?: SchedulePolicies } {
  const policies = policiesOf(def);
  return policies ? { policies } : {};
}

/**
 * Reading runs: one run, its steps and children, pages of runs or summaries, counts, queue depths,
 * crons and workflows; and the building of the (workflow, status) index those pages read. Checks
 * the options; the reads themselves are the store's (`store/run-queries.ts` and beside it). Its
 * public methods are documented where `WorkflowClient` forwards to them.
 */
export class RunReader {
  constructor(private readonly ctx: ClientContext) {}

  getRun<TOutput = unknown>(id: string): Promise<RunState<TOutput> | null> {
    if (!isPossibleRunId(id)) return Promise.resolve(null);
    return this.ctx.call(() => this.ctx.runQueries.run<TOutput>(id));
  }

  async getRunSteps(id: string): Promise<StepState[]> {
    if (!isPossibleRunId(id)) return [];
    return this.ctx.call(() => this.ctx.runQueries.steps(id, this.ctx.clock.now()));
  }

  async getRunAttempts(id: string): Promise<AttemptState[]> {
    if (!isPossibleRunId(id)) return [];
    return this.ctx.call(() => this.ctx.runQueries.attempts(id));
  }

  async getRunChildren(id: string): Promise<string[]> {
    if (!isPossibleRunId(id)) return [];
    return this.ctx.call(() => this.ctx.runQueries.children(id));
  }

  listRuns(options: ListRunsOptions = {}): Promise<RunState[]> {
    return this.ctx.call(() =>
      this.ctx.listQueries.page(checkListOptions(options, 'listRuns'), RUN_FIELDS, (id, f, pairStatus) => {
        // Listed by workflow and status, a run with an unknown status is skipped, as when this
        // list filtered the workflow's runs by status; a corrupt run still fails the list.
        if (f.status === null || (pairStatus && f.status !== pairStatus)) return undefined;
        return parseRun(id, f, this.ctx.payloads);
      }),
    );
  }

  listRunSummaries(options: ListRunsOptions = {}): Promise<RunSummary[]> {
    return this.ctx.call(() =>
      this.ctx.listQueries.page(checkListOptions(options, 'listRunSummaries'), SUMMARY_FIELDS, (id, f, _pairStatus, indexStatus) =>
        summarizeRun(id, f, indexStatus),
      ),
    );
  }

  async countRuns(options: CountRunsOptions = {}): Promise<number> {
    const filter = checkRunFilter(options, 'countRuns', COUNT_RUNS_OPTION_KEYS);
    return this.ctx.call(() => this.ctx.listQueries.count(filter));
  }

  async getQueueStats(options: QueueStatsOptions = {}): Promise<QueueStats[]> {
    assertKnownKeys('getQueueStats options', options, QUEUE_STATS_OPTION_KEYS);
    if (options.queues !== undefined && !Array.isArray(options.queues)) {
      throw new ConfigurationError(`getQueueStats queues must be an array of queue names, like ['default'], got ${typeof options.queues}.`);
    }
    const asked = (options.queues ?? []).map((q, i) => checkResourceName(q, `getQueueStats queues[${i}]`));
    return this.ctx.call(() => this.ctx.registryQueries.queueStats(asked, options.queues !== undefined));
  }

  listWorkers(): Promise<WorkerInfo[]> {
    return this.ctx.call(() => this.ctx.registryQueries.workers(Date.now()));
  }

  getStats(options: { minutes?: number } = {}): Promise<RunStats> {
    return this.ctx.call(async () => {
      assertKnownKeys('getStats options', options, ['minutes']);
      const minutes = checkInteger(options.minutes ?? 60, 'getStats minutes', 1, 24 * 60);
      const workflows = await this.ctx.registryQueries.workflowNames();
      return this.ctx.listQueries.stats(workflows, minutes, this.ctx.clock.now());
    });
  }

  async listCrons(): Promise<CronState[]> {
    return (await this.ctx.call(() => this.ctx.registryQueries.crons()))
      .map((entry) => cronStateOf(entry, this.ctx.payloads))
      .sort((a, b) => a.id.localeCompare(b.id) || a.source.localeCompare(b.source));
  }

  async listSchedules(): Promise<ScheduleState[]> {
    const schedules: ScheduleState[] = [];
    for (const { cronId, def, nextAt, paused } of await this.ctx.call(() => this.ctx.registryQueries.crons())) {
      const id = scheduleIdOf(cronId);
      if (id === undefined) continue;
      const shape = { cron: def.expression, every: def.every, rrule: def.rrule, timezone: def.timezone ?? undefined };
      schedules.push({
        id,
        workflow: def.workflow,
        ...shape,
        input: this.ctx.payloads.open(def.input, { kind: 'input' }),
        nextAt,
        ...withPolicies(def),
        ...(paused && { paused }),
      });
    }
    return schedules.sort((a, b) => a.id.localeCompare(b.id));
  }

  async listWorkflows(): Promise<WorkflowMeta[]> {
    const names = await this.ctx.call(() => this.ctx.registryQueries.workflowNames());
    const metas = await Promise.all(names.map((n) => this.getWorkflowMeta(n)));
    return metas.filter((m): m is WorkflowMeta => m !== null);
  }

  getWorkflowMeta(name: string): Promise<WorkflowMeta | null> {
    return this.ctx.call(() => this.ctx.registryQueries.workflowMeta(name));
  }

  hasUnfinishedRuns(workflow: string, version: number): Promise<boolean> {
    return this.ctx.listQueries.hasUnfinishedRuns(workflow, version);
  }

  backfillRunIndex(options: { force?: boolean; stopped?: () => boolean } = {}): Promise<'built' | 'done' | 'busy' | 'stopped'> {
    assertKnownKeys('backfillRunIndex options', options, ['force', 'stopped']);
    return this.backfill(options.force ?? false, options.stopped ?? (() => false));
  }

  /** Takes the marker, indexes every workflow's runs chunk by chunk, then marks the index built. */
  private async backfill(force: boolean, stopped: () => boolean): Promise<'built' | 'done' | 'busy' | 'stopped'> {
    const { listQueries, scripts } = this.ctx;
    if (!force && (await this.ctx.call(() => listQueries.runIndexBuilt()))) return 'done';
    const token = await this.ctx.call(() => listQueries.takeRunIndexMarker(force));
    if (token === undefined) return 'busy';
    for (const workflow of await this.ctx.call(() => listQueries.workflowsWithRuns())) {
      let cursor = '0';
      do {
        if (stopped()) return 'stopped';
        const chunk = await this.ctx.call(() => scripts.backfillRunIndex({ workflow, token, leaseMs: RUN_INDEX_LEASE_MS, cursor, count: RUN_INDEX_CHUNK }));
        if (!chunk) return 'busy';
        cursor = chunk.cursor;
      } while (cursor !== '0');
    }
    await this.ctx.call(() => listQueries.markRunIndexBuilt());
    return 'built';
  }
}
