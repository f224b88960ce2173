import { randomBytes } from 'node:crypto';
import { ConfigurationError, RedisWriteRefusedError } from '../errors';
import { isRunStatus, parseRun, RUN_FIELDS, summarizeRun, SUMMARY_FIELDS } from '../store/run-record';
import { scanPrefix } from '../store/prefix-scan';
import { assertKnownKeys, checkInteger, checkResourceName, checkWorkflowVersion, COUNT_RUNS_OPTION_KEYS, LIST_RUNS_OPTION_KEYS, parseVersionQueue, QUEUE_STATS_OPTION_KEYS } from '../definition/option-checks';
import { parseStepRecord, STEP_FIELD_PREFIX, TRIES_FIELD_PREFIX } from '../store/step-record';
import { RUN_STATUSES, TERMINAL_STATUSES, type RunState, type RunStatus, type RunSummary, type StepState } from '../definition/run-types';
import type { CountRunsOptions, ListRunsOptions } from '../definition/run-options';
import type { QueueStats, QueueStatsOptions, RunStats } from '../definition/stats-types';
import type { CronState, ScheduleState } from '../definition/schedule-types';
import type { WorkflowMeta, WorkflowVersionState } from '../definition/workflow-types';
import { decodeCron, scheduleIdOf, type StoredCron } from '../definition/cron';

import { checkRunEventsOptions, type RunEventsOptions } from '../definition/run-events';
import { RunEventStream } from './run-events-reader';
import { ClientCore, isPossibleRunId } from './client-core';

/**
 * The value of the `index:wfstatus` marker once the (workflow, status) index covers every run. 2:
 * every workflow with runs is in `wfnames`, and the status indexes of live statuses (no longer
 * kept since script version 7) are deleted.
 */
const RUN_INDEX_VERSION = '2';
/** Statuses whose status index engines before script version 7 kept, and later ones do not. */
const RETIRED_STATUS_INDEXES: readonly RunStatus[] = ['queued', 'scheduled', 'compensating'];
/** How long the marker stays taken without a chunk from its builder before another worker takes over. */
export const RUN_INDEX_LEASE_MS = 30_000;
/** Runs indexed per atomic call of the backfill (ZSCAN COUNT, so about this many). */
const RUN_INDEX_CHUNK = 500;
/** Ids read from the head of a ready list to find its oldest queued run (ids of runs canceled while queued may come first). */
const READY_HEAD = 10;

/** Runs read per pipeline when a list or count filters by version. */
const VERSION_SCAN_CHUNK = 1_000;
/** The statuses of runs that are not over: what a version without a worker still owes. */
const UNFINISHED_STATUSES: readonly RunStatus[] = ['queued', 'scheduled', 'running', 'compensating'];

/** Entries of several indexes newest first (highest score), each id once, then one page of them. */
function mergePage(entries: Array<{ id: string; indexStatus: RunStatus; score: number }>, limit: number, offset: number): Array<{ id: string; indexStatus: RunStatus }> {
  entries.sort((a, b) => b.score - a.score);
  const seen = new Set<string>();
  const unique = entries.filter(({ id }) => !seen.has(id) && seen.add(id));
  return unique.slice(offset, offset + limit).map(({ id, indexStatus }) => ({ id, indexStatus }));
}

/** The workflow, status and version filters of a list or count call, checked. */
function checkRunFilter(options: CountRunsOptions, what: string, known: readonly string[]): { workflow?: string; status?: RunStatus; version?: number } {
  assertKnownKeys(`${what} options`, options, known);
  if (options.status !== undefined && !isRunStatus(options.status)) {
    throw new ConfigurationError(`${what} status must be one of ${RUN_STATUSES.join(', ')}, got ${JSON.stringify(options.status)}.`);
  }
  if (options.workflow !== undefined && typeof options.workflow !== 'string') {
    throw new ConfigurationError(`${what} workflow must be a workflow name, got ${typeof options.workflow}.`);
  }
  if (options.version !== undefined) {
    checkWorkflowVersion(options.version, `${what} version`);
    if (!options.workflow) throw new ConfigurationError(`${what} version needs a workflow: versions are per workflow, as in { workflow: "checkout", version: 1 }.`);
  }
  return { workflow: options.workflow || undefined, status: options.status, version: options.version };
}

/** The filters of a list call, checked, with their defaults. */
function checkListOptions(options: ListRunsOptions, what: string): { workflow?: string; status?: RunStatus; version?: number; limit: number; offset: number } {
  const filter = checkRunFilter(options, what, LIST_RUNS_OPTION_KEYS);
  const limit = checkInteger(options.limit ?? 50, `${what} limit`, 0, 10_000);
  const offset = checkInteger(options.offset ?? 0, `${what} offset`, 0, 1_000_000_000);
  return { ...filter, limit, offset };
}

/** Reading runs: one run, its steps and children, pages of runs or summaries, counts, crons and
 * workflows; and the (workflow, status) index those pages read. */
export class RunReader extends ClientCore {
  private readonly openStreams = new Set<RunEventStream>();

  /**
   * The run events of this prefix, as they happen (`{prefix}:events`, written by the scripts of
   * every client and worker whose `events` option is on): an async iterable that also closes with
   * `break`, `await using` or `close()`. It reads on a connection of its own, holds at most
   * `bufferSize` events (it stops reading Redis while the consumer is slow), and after a Redis
   * outage goes on after the last event it read. Filters apply in this process.
   */
  events(options?: RunEventsOptions): RunEventStream {
    const settings = checkRunEventsOptions(options);
    const stream: RunEventStream = new RunEventStream(this.redis, this.keys.events(), settings, this.logger, this.health, () => this.openStreams.delete(stream));
    this.openStreams.add(stream);
    return stream;
  }

  /** Closes the event streams still open, then the client. */
  override async close(): Promise<void> {
    await Promise.all([...this.openStreams].map((stream) => stream.close()));
    await super.close();
  }

  /** A run, or null when it does not exist. */
  async getRun<TOutput = unknown>(id: string): Promise<RunState<TOutput> | null> {
    if (!isPossibleRunId(id)) return null;
    const values = await this.call(() => this.redis.hmget(this.keys.run(id), ...RUN_FIELDS));
    if (values.every((v) => v === null)) return null;
    return parseRun<TOutput>(id, Object.fromEntries(RUN_FIELDS.map((f, i) => [f, values[i]])));
  }

  /** A run's stored steps, in the order they were stored. */
  async getRunSteps(id: string): Promise<StepState[]> {
    if (!isPossibleRunId(id)) return [];
    const hash = await this.call(() => this.redis.hgetall(this.keys.run(id)));
    const steps: StepState[] = [];
    for (const [field, value] of Object.entries(hash)) {
      if (field.startsWith(STEP_FIELD_PREFIX)) steps.push(parseStepRecord(id, field, value, hash[TRIES_FIELD_PREFIX + field.slice(STEP_FIELD_PREFIX.length)], this.clock.now()));
    }
    return steps.sort((a, b) => a.seq - b.seq);
  }

  /**
   * Runs, newest first, filtered by workflow and/or status. Running runs come first, queued and
   * scheduled runs sort by creation time, ended runs by finish time. Filtered by workflow alone,
   * runs sort by creation time; filtered by workflow and status, as that status sorts, except
   * running runs, which sort by creation time too. Each page reads one index and only its runs.
   */
  listRuns(options: ListRunsOptions = {}): Promise<RunState[]> {
    return this.call(() =>
      this.listPage(options, 'listRuns', RUN_FIELDS, (id, f, pairStatus) => {
        // Listed by workflow and status, a run with an unknown status is skipped, as when this
        // list filtered the workflow's runs by status; a corrupt run still fails the list.
        if (f.status === null || (pairStatus && f.status !== pairStatus)) return undefined;
        return parseRun(id, f);
      }),
    );
  }

  /**
   * Like `listRuns` (same filters, paging and order), but reads only what a list row shows: never
   * input, output or step records. A run whose stored fields cannot be read comes back as a
   * `CorruptRunSummary` (with `corrupt` set) instead of failing the page.
   */
  listRunSummaries(options: ListRunsOptions = {}): Promise<RunSummary[]> {
    return this.call(() => this.listPage(options, 'listRunSummaries', SUMMARY_FIELDS, (id, f, _pairStatus, indexStatus) => summarizeRun(id, f, indexStatus)));
  }

  /**
   * How many runs there are, filtered by workflow and/or status, as the indexes `listRuns` reads
   * count them: one `ZCARD` (workflow and status, an ended status, or running), else the `ZCARD`s
   * of the indexes whose union the filter is (a workflow's nine; a live status's, one per
   * workflow) added up in one round trip. O(1) in Redis per index whatever the number of runs.
   */
  async countRuns(options: CountRunsOptions = {}): Promise<number> {
    const { workflow, status, version } = checkRunFilter(options, 'countRuns', COUNT_RUNS_OPTION_KEYS);
    return this.call(async () => {
      if (workflow && version !== undefined) return (await this.versionEntries(workflow, status, version, Infinity, 0)).length;
      const indexes = await this.indexesOf(workflow, status);
      if (indexes.length === 1) return this.redis.zcard(indexes[0].key);
      return ((await this.exec(indexes.map(({ key }) => ['zcard', key]))) as number[]).reduce((sum, count) => sum + Number(count), 0);
    });
  }

  /**
   * The depth of each queue: queued, scheduled and running runs, and when its oldest queued run
   * became claimable. Cheap enough to call on every metrics scrape or health check: two round
   * trips for the registry and the counts (LLEN, ZCARD, a short LRANGE per queue, one ZCARD per
   * registered workflow), one for the head runs; no scan of the runs.
   */
  async getQueueStats(options: QueueStatsOptions = {}): Promise<QueueStats[]> {
    assertKnownKeys('getQueueStats options', options, QUEUE_STATS_OPTION_KEYS);
    if (options.queues !== undefined && !Array.isArray(options.queues)) {
      throw new ConfigurationError(`getQueueStats queues must be an array of queue names, like ['default'], got ${typeof options.queues}.`);
    }
    const asked = (options.queues ?? []).map((q, i) => checkResourceName(q, `getQueueStats queues[${i}]`));
    return this.call(async () => {
      const workflows = await this.redis.smembers(this.keys.workflows());
      const queueOf = await this.exec(workflows.map((w) => ['hget', this.keys.workflow(w), 'queue']));
      const byQueue = new Map<string, string[]>(asked.map((q) => [q, []]));
      workflows.forEach((workflow, i) => {
        const queue = queueOf[i] as string | null;
        if (!queue || (options.queues && !byQueue.has(queue))) return;
        byQueue.set(queue, [...(byQueue.get(queue) ?? []), workflow]);
      });
      const queues = [...byQueue.keys()].sort();
      const counts = await this.exec(
        queues.flatMap((q) => [
          ['llen', this.keys.ready(q)],
          ['zcard', this.keys.scheduled(q)],
          ['lrange', this.keys.ready(q), '0', String(READY_HEAD - 1)],
          ...byQueue.get(q)!.map((w) => ['zcard', this.keys.workflowStatusRuns('running', w)]),
        ]),
      );
      let at = 0;
      const rows = queues.map((queue) => {
        const [queued, scheduled, head] = counts.slice(at, at + 3) as [number, number, string[]];
        const running = (counts.slice(at + 3, at + 3 + byQueue.get(queue)!.length) as number[]).reduce((sum, n) => sum + Number(n), 0);
        at += 3 + byQueue.get(queue)!.length;
        return { queue, queued: Number(queued), scheduled: Number(scheduled), running, head };
      });
      const heads = rows.flatMap((r) => r.head);
      const fields = await this.exec(heads.map((id) => ['hmget', this.keys.run(id), 'status', 'availableAt', 'createdAt']));
      const headRun = new Map(heads.map((id, i) => [id, fields[i] as Array<string | null>]));
      return rows.map(({ head, ...row }): QueueStats => {
        const first = head.map((id) => headRun.get(id)).find((f) => f?.[0] === 'queued');
        return { ...row, oldestQueuedAt: first ? Number(first[1] ?? first[2]) : null };
      });
    });
  }

  /** Runs commands in one pipeline and returns their replies; the first error is thrown. */
  private async exec(commands: string[][]): Promise<unknown[]> {
    if (!commands.length) return [];
    const replies = (await this.redis.pipeline(commands).exec()) ?? [];
    return replies.map(([error, reply]) => {
      if (error) throw error;
      return reply;
    });
  }

  /**
   * One page of runs: the ids from one index read, then the fields of those runs in one pipeline.
   * Ids whose run no longer exists are skipped. A (workflow, status) entry whose run has another
   * status was left by an older engine during a rolling deploy: it is skipped and pruned, and the
   * page read again so that it stays full. `toRow` gets the status of a (workflow, status) page
   * (`pairStatus`) and the status of the index each run was listed from (`indexStatus`).
   */
  protected async listPage<F extends string, T>(
    options: ListRunsOptions,
    what: string,
    fields: readonly F[],
    toRow: (id: string, values: Record<F, string | null>, pairStatus: RunStatus | undefined, indexStatus: RunStatus | undefined) => T | undefined,
  ): Promise<T[]> {
    const { workflow, status, version, limit, offset } = checkListOptions(options, what);
    if (limit === 0) return [];
    const pairStatus = workflow ? status : undefined;
    const statusAt = fields.indexOf('status' as F);
    for (let read = 1; ; read++) {
      const entries = workflow && version !== undefined ? await this.versionEntries(workflow, status, version, limit, offset) : await this.pageEntries(workflow, status, limit, offset);
      const values = await this.readRuns(entries.map((e) => e.id), fields);
      const rows: T[] = [];
      const stale: string[] = [];
      entries.forEach(({ id, indexStatus }, i) => {
        const v = values[i];
        const gone = v.every((value) => value === null);
        if (pairStatus && (gone || (v[statusAt] !== pairStatus && isRunStatus(v[statusAt])))) stale.push(id);
        else if (!gone) {
          const row = toRow(id, Object.fromEntries(fields.map((f, j) => [f, v[j]])) as Record<F, string | null>, pairStatus, indexStatus);
          if (row !== undefined) rows.push(row);
        }
      });
      if (!workflow || !pairStatus || !stale.length || read === 3 || !(await this.pruneRunIndex(pairStatus, workflow, stale))) return rows;
    }
  }

  /**
   * The indexes whose union holds the runs of a filter, each with the status it lists. Workflow
   * and status: that pair's index. Workflow: its nine (workflow, status) indexes. An ended
   * status: its status index (scored by finish time). Running: the leases zset. Another live
   * status: its (workflow, status) index of every workflow in `wfnames`. Neither: all of those.
   */
  protected async indexesOf(workflow: string | undefined, status: RunStatus | undefined): Promise<Array<{ key: string; status: RunStatus }>> {
    if (workflow && status) return [{ key: this.keys.workflowStatusRuns(status, workflow), status }];
    if (workflow) return RUN_STATUSES.map((s) => ({ key: this.keys.workflowStatusRuns(s, workflow), status: s }));
    let names: string[] | undefined;
    const indexes: Array<{ key: string; status: RunStatus }> = [];
    for (const s of status ? [status] : RUN_STATUSES) {
      if (TERMINAL_STATUSES.has(s)) indexes.push({ key: this.keys.status(s), status: s });
      else if (s === 'running') indexes.push({ key: this.keys.leases(), status: s });
      else {
        names ??= (await this.redis.smembers(this.keys.workflowNames())).sort();
        for (const name of names) indexes.push({ key: this.keys.workflowStatusRuns(s, name), status: s });
      }
    }
    return indexes;
  }

  /**
   * The ids of a page, newest first, each with the status of the index it came from. One index:
   * that page of it. Several (see `indexesOf`): the first `offset + limit` entries of each, merged
   * by score (running runs first: the leases zset scores by lease expiry), an id listed twice
   * (an entry an older engine left) shown once.
   */
  protected async pageEntries(workflow: string | undefined, status: RunStatus | undefined, limit: number, offset: number): Promise<Array<{ id: string; indexStatus?: RunStatus }>> {
    const indexes = await this.indexesOf(workflow, status);
    if (indexes.length === 1) return (await this.redis.zrevrange(indexes[0].key, offset, offset + limit - 1)).map((id) => ({ id, indexStatus: indexes[0].status }));
    const replies = (await this.exec(indexes.map(({ key }) => ['zrevrange', key, '0', String(offset + limit - 1), 'WITHSCORES']))) as string[][];
    const merged: Array<{ id: string; indexStatus: RunStatus; score: number }> = [];
    replies.forEach((flat, i) => {
      for (let j = 0; j < flat.length; j += 2) merged.push({ id: flat[j], indexStatus: indexes[i].status, score: Number(flat[j + 1]) });
    });
    return mergePage(merged, limit, offset);
  }

  /**
   * The ids of a page of one workflow's runs of one version, newest first: no index holds runs by
   * version, so each of the workflow's (status) indexes the filter names is read in chunks of
   * 1,000 with the `queue` field of each run (version N > 1 waits in "<queue>@v<N>"), until it
   * gave `offset + limit` runs of the version; then merged as `pageEntries` does. O(runs of the
   * workflow in those statuses); `limit` Infinity reads them all (countRuns).
   */
  protected async versionEntries(workflow: string, status: RunStatus | undefined, version: number, limit: number, offset: number): Promise<Array<{ id: string; indexStatus?: RunStatus }>> {
    const merged: Array<{ id: string; indexStatus: RunStatus; score: number }> = [];
    for (const index of await this.indexesOf(workflow, status)) {
      let found = 0;
      for (let start = 0; found < offset + limit; start += VERSION_SCAN_CHUNK) {
        const flat = await this.redis.zrevrange(index.key, start, start + VERSION_SCAN_CHUNK - 1, 'WITHSCORES');
        const ids = flat.filter((_, i) => i % 2 === 0);
        const queues = await this.exec(ids.map((id) => ['hget', this.keys.run(id), 'queue']));
        ids.forEach((id, i) => {
          const queue = queues[i] as string | null;
          if (queue === null || parseVersionQueue(queue).version !== version || found >= offset + limit) return;
          found++;
          merged.push({ id, indexStatus: index.status, score: Number(flat[2 * i + 1]) });
        });
        if (ids.length < VERSION_SCAN_CHUNK) break;
      }
    }
    return mergePage(merged, limit, offset);
  }

  /** Fields of runs by id, in one round trip. */
  protected async readRuns<F extends string>(ids: string[], fields: readonly F[]): Promise<(string | null)[][]> {
    if (!ids.length) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.run(id), ...fields);
    return ((await pipeline.exec()) ?? []).map(([error, reply]) => {
      if (error) throw error;
      return reply as (string | null)[];
    });
  }

  /**
   * Prunes stale entries of a (workflow, status) index; false when none was taken out (or Redis
   * refuses writes: the page is then shown without them, and pruned by a later read).
   */
  protected async pruneRunIndex(status: RunStatus, workflow: string, ids: string[]): Promise<boolean> {
    try {
      return (await this.scripts.pruneRunIndex(status, workflow, ids)) > 0;
    } catch (error) {
      if (error instanceof RedisWriteRefusedError) return false;
      throw error;
    }
  }

  /**
   * Builds the (workflow, status) index that `listRuns` and `listRunSummaries` read, for runs
   * stored before it existed: a worker calls it when it starts. The first caller of a prefix
   * takes the `index:wfstatus` marker (with a lease, renewed by each chunk) and indexes every
   * workflow's runs, 500 per atomic call; the marker says the index is built only after the last
   * chunk. Returns `built`, `done` (built before), `busy` (another process is building it: call
   * again later, it takes over if that process stopped), or `stopped` (`stopped()` became true;
   * the marker's lease runs out and a later call starts over). With `force`, builds it again even
   * when it is built: after a rolling deploy during which workers older than the index moved runs.
   */
  backfillRunIndex(options: { force?: boolean; stopped?: () => boolean } = {}): Promise<'built' | 'done' | 'busy' | 'stopped'> {
    assertKnownKeys('backfillRunIndex options', options, ['force', 'stopped']);
    return this.backfillRunIndexNow(options.force ?? false, options.stopped ?? (() => false));
  }

  protected async backfillRunIndexNow(force: boolean, stopped: () => boolean): Promise<'built' | 'done' | 'busy' | 'stopped'> {
    const marker = this.keys.workflowStatusIndexMarker();
    if (!force && (await this.call(() => this.redis.get(marker))) === RUN_INDEX_VERSION) return 'done';
    const token = `building:${randomBytes(8).toString('hex')}`;
    const taken = await this.call(() => (force ? this.redis.set(marker, token, 'PX', RUN_INDEX_LEASE_MS) : this.redis.set(marker, token, 'PX', RUN_INDEX_LEASE_MS, 'NX')));
    if (taken !== 'OK') return 'busy';
    for (const workflow of await this.call(() => this.workflowsWithRuns())) {
      let cursor = '0';
      do {
        if (stopped()) return 'stopped';
        const chunk = await this.call(() => this.scripts.backfillRunIndex({ workflow, token, leaseMs: RUN_INDEX_LEASE_MS, cursor, count: RUN_INDEX_CHUNK }));
        if (!chunk) return 'busy';
        cursor = chunk.cursor;
      } while (cursor !== '0');
    }
    await this.call(() => this.redis.del(...RETIRED_STATUS_INDEXES.map((s) => this.keys.status(s))));
    await this.call(() => this.redis.set(marker, RUN_INDEX_VERSION));
    return 'built';
  }

  /** Names of the workflows that have a runs index, registered or not (a deleted workflow's runs stay). */
  protected async workflowsWithRuns(): Promise<string[]> {
    const names: string[] = [];
    await scanPrefix(this.redis, this.keys, this.keys.workflowRunsPattern(), async (keys) => {
      for (const key of keys) {
        const name = this.keys.workflowOfRuns(key);
        if (name !== undefined) names.push(name);
      }
    });
    return names.sort();
  }

  /** Ids of the child runs a run waits or waited on (`step.runWorkflow`). */
  async getRunChildren(id: string): Promise<string[]> {
    if (!isPossibleRunId(id)) return [];
    return (await this.call(() => this.redis.smembers(this.keys.children(id)))).sort();
  }

  /**
   * Counts for an overview: runs per status, runs per workflow (as indexed), and runs that
   * succeeded or failed in each of the last `minutes` minutes (oldest first).
   */
  getStats(options: { minutes?: number } = {}): Promise<RunStats> {
    return this.call(() => this.getStatsNow(options));
  }

  protected async getStatsNow(options: { minutes?: number }): Promise<RunStats> {
    assertKnownKeys('getStats options', options, ['minutes']);
    const minutes = checkInteger(options.minutes ?? 60, 'getStats minutes', 1, 24 * 60);
    const workflows = (await this.redis.smembers(this.keys.workflows())).sort();
    const now = this.clock.now();
    const start = now - (now % 60_000) - (minutes - 1) * 60_000;
    const statusIndexes = await Promise.all(RUN_STATUSES.map((s) => this.indexesOf(undefined, s)));
    const commands: string[][] = [];
    for (const indexes of statusIndexes) for (const { key } of indexes) commands.push(['zcard', key]);
    for (const name of workflows) for (const s of RUN_STATUSES) commands.push(['zcard', this.keys.workflowStatusRuns(s, name)]);
    for (const status of ['succeeded', 'failed'] as const) {
      for (let i = 0; i < minutes; i++) commands.push(['zcount', this.keys.status(status), String(start + i * 60_000), String(start + (i + 1) * 60_000 - 1)]);
    }
    const replies = (await this.exec(commands)).map(Number);
    let at = 0;
    const take = (n: number) => replies.slice(at, (at += n)).reduce((sum, count) => sum + count, 0);
    const byStatus = Object.fromEntries(RUN_STATUSES.map((s, i) => [s, take(statusIndexes[i].length)])) as Record<RunStatus, number>;
    const byWorkflow = Object.fromEntries(workflows.map((w) => [w, take(RUN_STATUSES.length)]));
    const offset = at;
    const perMinute = Array.from({ length: minutes }, (_, i) => ({
      minute: start + i * 60_000,
      succeeded: replies[offset + i],
      failed: replies[offset + minutes + i],
    }));
    return { byStatus, byWorkflow, perMinute };
  }

  /**
   * Cron schedules registered in Redis, with their next tick: the `cron` triggers of workflow
   * definitions (`source: 'definition'`) and the schedules of `schedule()` (`source: 'runtime'`).
   */
  async listCrons(): Promise<CronState[]> {
    return (await this.readCrons())
      .map(({ cronId, def, nextAt }): CronState => {
        const scheduleId = scheduleIdOf(cronId);
        return {
          id: scheduleId ?? cronId,
          source: scheduleId === undefined ? 'definition' : 'runtime',
          workflow: def.workflow,
          expression: def.expression,
          every: def.every,
          timezone: def.timezone ?? undefined,
          input: def.input,
          nextAt,
        };
      })
      .sort((a, b) => a.id.localeCompare(b.id) || a.source.localeCompare(b.source));
  }

  /** The schedules added by `schedule()`, by id, with their next tick. */
  async listSchedules(): Promise<ScheduleState[]> {
    const schedules: ScheduleState[] = [];
    for (const { cronId, def, nextAt } of await this.readCrons()) {
      const id = scheduleIdOf(cronId);
      if (id === undefined) continue;
      schedules.push({ id, workflow: def.workflow, cron: def.expression, every: def.every, timezone: def.timezone ?? undefined, input: def.input, nextAt });
    }
    return schedules.sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Every entry of `cron:defs`, decoded, with its next tick from `cron:next`. */
  protected async readCrons(): Promise<Array<{ cronId: string; def: StoredCron; nextAt?: number }>> {
    const [defs, next] = await this.call(() => Promise.all([this.redis.hgetall(this.keys.cronDefs()), this.redis.zrange(this.keys.cronNext(), 0, '-1', 'WITHSCORES')]));
    const nextById = new Map<string, number>();
    for (let i = 0; i < next.length; i += 2) nextById.set(next[i], Number(next[i + 1]));
    return Object.entries(defs).map(([cronId, json]) => ({ cronId, def: decodeCron(json), nextAt: nextById.get(cronId) }));
  }

  /**
   * The versions of a workflow from its `wfversions:` hash: live workers per version, and for a
   * version with none, `noWorker` when runs started on it are not over (counted by version).
   */
  protected async versionStates(workflow: string, fields: Record<string, string>): Promise<WorkflowVersionState[]> {
    const now = Date.now();
    const byVersion = new Map<number, WorkflowVersionState>();
    for (const [field, value] of Object.entries(fields)) {
      const [version, worker] = field.split('\n');
      const state = byVersion.get(Number(version)) ?? { version: Number(version), workers: [], updatedAt: 0 };
      byVersion.set(state.version, state);
      if (worker === undefined) state.updatedAt = Number(value);
      else if (Number(value) >= now) state.workers.push(worker);
    }
    const states = [...byVersion.values()].sort((a, b) => a.version - b.version);
    for (const state of states) {
      if (state.workers.length || !(await this.hasUnfinishedRuns(workflow, state.version))) continue;
      state.noWorker = `no worker for ${workflow} v${state.version}`;
    }
    return states;
  }

  /**
   * True when runs of `workflow` started on `version` are queued, scheduled (waiting included),
   * running or compensating. Two round trips whatever the backlog: it reads the 1,000 oldest runs
   * of each of those statuses, where the runs of an older version sit (they were created before
   * the newer version's), so a pinned run of an old version behind a newer backlog may be missed.
   */
  async hasUnfinishedRuns(workflow: string, version: number): Promise<boolean> {
    const indexes = await this.exec(UNFINISHED_STATUSES.map((status) => ['zrange', this.keys.workflowStatusRuns(status, workflow), '0', String(VERSION_SCAN_CHUNK - 1)]));
    const ids = (indexes as string[][]).flat();
    const queues = await this.exec(ids.map((id) => ['hget', this.keys.run(id), 'queue']));
    return queues.some((queue) => typeof queue === 'string' && parseVersionQueue(queue).version === version);
  }

  /** Workflows registered in Redis by workers (or `syncRegistry`). */
  async listWorkflows(): Promise<WorkflowMeta[]> {
    const names = (await this.call(() => this.redis.smembers(this.keys.workflows()))).sort();
    const metas = await Promise.all(names.map((n) => this.getWorkflowMeta(n)));
    return metas.filter((m): m is WorkflowMeta => m !== null);
  }

  async getWorkflowMeta(name: string): Promise<WorkflowMeta | null> {
    const [h, versions] = await this.call(() => Promise.all([this.redis.hgetall(this.keys.workflow(name)), this.redis.hgetall(this.keys.workflowVersions(name))]));
    if (!h.queue) return null;
    const list = (value: string | undefined) => (value ? value.split('\n') : []);
    const limit = Number(h.maxConcurrency ?? 0);
    return {
      name,
      queue: parseVersionQueue(h.queue).queue,
      version: Number(h.version ?? 1),
      versions: await this.versionStates(name, versions),
      maxAttempts: Number(h.maxAttempts),
      maxConcurrency: limit > 0 ? limit : Infinity,
      events: list(h.events),
      crons: list(h.crons),
      owner: h.owner,
      updatedAt: Number(h.updatedAt),
    };
  }
}
