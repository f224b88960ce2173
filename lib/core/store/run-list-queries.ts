import { randomBytes } from 'node:crypto';

import { parseVersionQueue } from '../definition/option-checks';
import { RUN_STATUSES, TERMINAL_STATUSES, type RunStatus, type WaitKind } from '../definition/run-types';
import { type RunStats } from '../definition/stats-types';
import { RedisWriteRefusedError } from '../errors';
import type { RedisConnection } from './connection';
import type { RedflowKeys } from './keys';
import { scanPrefix } from './prefix-scan';
import type { RedisScripts } from './redis-scripts';
import { pipelineReplies, type RunQueries } from './run-queries';
import { isRunStatus } from './run-record';

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

/** Runs read per pipeline when a list or count filters by version. */
const VERSION_SCAN_CHUNK = 1_000;
/** The statuses of runs that are not over: what a version without a worker still owes. */
const UNFINISHED_STATUSES: readonly RunStatus[] = ['queued', 'scheduled', 'running', 'compensating'];

/** The checked filters of a list or count: by workflow, status, version (with a workflow only) and wait. */
export interface RunFilter {
  workflow?: string;
  status?: RunStatus;
  version?: number;
  /** Runs suspended waiting for this kind (and signal or event name): they are `scheduled`. */
  waiting?: { kind: WaitKind; name?: string };
}

/** How a run's `wait` field starts when it waits for `waiting` ("<kind>\n<name>\n<until>"). */
function waitStart({ kind, name }: { kind: WaitKind; name?: string }): string {
  return name === undefined ? `${kind}\n` : `${kind}\n${name}\n`;
}

/** An entry of an index, with its score. */
type ScoredEntry = { id: string; indexStatus: RunStatus; score: number };

/** The index entries of a page: run ids, each with the status of the index it was listed from. */
type PageEntries = Array<{ id: string; indexStatus?: RunStatus }>;

/** Entries of several indexes newest first (highest score), each id once, then one page of them. */
function mergePage(entries: ScoredEntry[], limit: number, offset: number): PageEntries {
  entries.sort((a, b) => b.score - a.score);
  const seen = new Set<string>();
  const unique = entries.filter(({ id }) => !seen.has(id) && seen.add(id));
  return unique.slice(offset, offset + limit).map(({ id, indexStatus }) => ({ id, indexStatus }));
}

/**
 * Reads of the run indexes: pages of runs, counts and the overview's figures, and the upkeep of
 * the (workflow, status) index those pages read (stale entries, the backfill marker).
 */
export class RunListQueries {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: RedflowKeys,
    private readonly scripts: RedisScripts,
    private readonly runs: RunQueries,
  ) {}

  /**
   * One page of runs: the ids from one index read, then the fields of those runs in one pipeline.
   * Ids whose run no longer exists are skipped. A (workflow, status) entry whose run has another
   * status was left by an older engine during a rolling deploy: it is skipped and pruned, and the
   * page read again so that it stays full. `toRow` gets the status of a (workflow, status) page
   * (`pairStatus`) and the status of the index each run was listed from (`indexStatus`). With a
   * `waiting` filter, `fields` must hold `status` and `wait`: an entry whose run no longer waits so
   * (a `waiting:` index a crash or an edit left behind) is skipped and pruned the same way.
   */
  async page<F extends string, T>(
    filter: RunFilter & { limit: number; offset: number },
    fields: readonly F[],
    toRow: (id: string, values: Record<F, string | null>, pairStatus: RunStatus | undefined, indexStatus: RunStatus | undefined) => T | undefined,
  ): Promise<T[]> {
    const { workflow, status, version, waiting, limit, offset } = filter;
    if (limit === 0) return [];
    const pairStatus = workflow && !waiting ? status : undefined;
    const statusAt = fields.indexOf('status' as F);
    const waitAt = fields.indexOf('wait' as F);
    for (let read = 1; ; read++) {
      const entries = waiting
        ? await this.waitingEntries(filter, waiting, limit, offset)
        : workflow && version !== undefined
          ? await this.versionEntries(workflow, status, version, limit, offset)
          : await this.pageEntries(workflow, status, limit, offset);
      const values = await this.runs.fields(
        entries.map((e) => e.id),
        fields,
      );
      const rows: T[] = [];
      const stale: string[] = [];
      entries.forEach(({ id, indexStatus }, i) => {
        const v = values[i];
        const gone = v.every((value) => value === null);
        // A waiting entry counts only while its run is scheduled with that wait (read in the same HMGET).
        const notWaiting = waiting && (v[statusAt] !== 'scheduled' || !v[waitAt]?.startsWith(waitStart(waiting)));
        if ((pairStatus && (gone || (v[statusAt] !== pairStatus && isRunStatus(v[statusAt])))) || notWaiting) stale.push(id);
        else if (!gone) {
          const row = toRow(id, Object.fromEntries(fields.map((f, j) => [f, v[j]])) as Record<F, string | null>, pairStatus, indexStatus);
          if (row !== undefined) rows.push(row);
        }
      });
      if (!stale.length || read === 3) return rows;
      if (waiting) {
        if (!(await this.pruneIndex(() => this.scripts.pruneWaitIndex(this.waitingKey(waiting), waitStart(waiting), stale)))) return rows;
      } else if (!workflow || !pairStatus || !(await this.pruneIndex(() => this.scripts.pruneRunIndex(pairStatus, workflow, stale)))) return rows;
    }
  }

  /**
   * How many runs a filter holds: one `ZCARD` of its one index, else the `ZCARD`s of the indexes
   * whose union it is, added up in one round trip. With a version, the runs of that version,
   * counted as `page` finds them. With `waiting`, the `ZCARD` of its `waiting:` index (with a
   * workflow, its runs of that workflow, counted as `page` finds them).
   */
  async count(filter: RunFilter): Promise<number> {
    const { workflow, status, version, waiting } = filter;
    if (waiting) {
      if (!workflow) return this.redis.zcard(this.waitingKey(waiting));
      return (await this.waitingEntries(filter, waiting, Infinity, 0)).length;
    }
    if (workflow && version !== undefined) return (await this.versionEntries(workflow, status, version, Infinity, 0)).length;
    const indexes = await this.indexesOf(workflow, status);
    if (indexes.length === 1) return this.redis.zcard(indexes[0].key);
    return (
      (await pipelineReplies(
        this.redis,
        indexes.map(({ key }) => ['zcard', key]),
      )) as number[]
    ).reduce((sum, count) => sum + Number(count), 0);
  }

  /**
   * Runs per status, runs per workflow of `workflows` (as indexed), and runs that succeeded or
   * failed in each of the `minutes` minutes up to `now` (oldest first), in one round trip.
   */
  async stats(workflows: string[], minutes: number, now: number): Promise<RunStats> {
    const start = now - (now % 60_000) - (minutes - 1) * 60_000;
    const statusIndexes = await Promise.all(RUN_STATUSES.map((s) => this.indexesOf(undefined, s)));
    const commands: string[][] = [];
    for (const indexes of statusIndexes) for (const { key } of indexes) commands.push(['zcard', key]);
    for (const name of workflows) for (const s of RUN_STATUSES) commands.push(['zcard', this.keys.workflowStatusRuns(s, name)]);
    for (const status of ['succeeded', 'failed'] as const) {
      for (let i = 0; i < minutes; i++) commands.push(['zcount', this.keys.status(status), String(start + i * 60_000), String(start + (i + 1) * 60_000 - 1)]);
    }
    const replies = (await pipelineReplies(this.redis, commands)).map(Number);
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
   * True when runs of `workflow` started on `version` are queued, scheduled (waiting included),
   * running or compensating. Two round trips whatever the backlog: it reads the 1,000 oldest runs
   * of each of those statuses, where the runs of an older version sit (they were created before
   * the newer version's), so a pinned run of an old version behind a newer backlog may be missed.
   */
  async hasUnfinishedRuns(workflow: string, version: number): Promise<boolean> {
    const oldest = UNFINISHED_STATUSES.map((status) => ['zrange', this.keys.workflowStatusRuns(status, workflow), '0', String(VERSION_SCAN_CHUNK - 1)]);
    const indexes = await pipelineReplies(this.redis, oldest);
    const ids = (indexes as string[][]).flat();
    const queues = await pipelineReplies(
      this.redis,
      ids.map((id) => ['hget', this.keys.run(id), 'queue']),
    );
    return queues.some((queue) => typeof queue === 'string' && parseVersionQueue(queue).version === version);
  }

  /**
   * The indexes whose union holds the runs of a filter, each with the status it lists. Workflow
   * and status: that pair's index. Workflow: its nine (workflow, status) indexes. An ended
   * status: its status index (scored by finish time). Running: the leases zset. Another live
   * status: its (workflow, status) index of every workflow in `wfnames`. Neither: all of those.
   */
  private async indexesOf(workflow: string | undefined, status: RunStatus | undefined): Promise<Array<{ key: string; status: RunStatus }>> {
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
  private async pageEntries(workflow: string | undefined, status: RunStatus | undefined, limit: number, offset: number): Promise<PageEntries> {
    const indexes = await this.indexesOf(workflow, status);
    if (indexes.length === 1)
      return (await this.redis.zrevrange(indexes[0].key, offset, offset + limit - 1)).map((id) => ({ id, indexStatus: indexes[0].status }));
    const replies = (await pipelineReplies(
      this.redis,
      indexes.map(({ key }) => ['zrevrange', key, '0', String(offset + limit - 1), 'WITHSCORES']),
    )) as string[][];
    const merged: Array<{ id: string; indexStatus: RunStatus; score: number }> = [];
    replies.forEach((flat, i) => {
      for (let j = 0; j < flat.length; j += 2) merged.push({ id: flat[j], indexStatus: indexes[i].status, score: Number(flat[j + 1]) });
    });
    return mergePage(merged, limit, offset);
  }

  /**
   * The ids of a page of one workflow's runs of one version, newest first: no index holds runs by
   * version, so each of the workflow's (status) indexes the filter names is read (`scanIndex`)
   * until it gave `offset + limit` runs of the version; then merged as `pageEntries` does.
   * O(runs of the workflow in those statuses); `limit` Infinity reads them all (count).
   */
  private async versionEntries(workflow: string, status: RunStatus | undefined, version: number, limit: number, offset: number): Promise<PageEntries> {
    const merged: ScoredEntry[] = [];
    for (const index of await this.indexesOf(workflow, status)) {
      merged.push(...(await this.scanIndex(index, offset + limit, (_, queue) => queue !== null && parseVersionQueue(queue).version === version)));
    }
    return mergePage(merged, limit, offset);
  }

  /** The `waiting:` index of a wait filter: of its kind, or of its signal or event name. */
  private waitingKey(waiting: { kind: WaitKind; name?: string }): string {
    return this.keys.waiting(waiting.kind, waiting.name);
  }

  /**
   * The ids of a page of runs waiting as `waiting` says, newest first (by creation time): a page
   * of its `waiting:` index; with a workflow (and a version), that index read by `scanIndex` until
   * it gave `offset + limit` runs of the workflow (O(runs waiting so)).
   */
  private async waitingEntries(filter: RunFilter, waiting: { kind: WaitKind; name?: string }, limit: number, offset: number): Promise<PageEntries> {
    const index = { key: this.waitingKey(waiting), status: 'scheduled' as const };
    const { workflow, version } = filter;
    if (!workflow) return (await this.redis.zrevrange(index.key, offset, offset + limit - 1)).map((id) => ({ id, indexStatus: index.status }));
    const keep = (runWorkflow: string | null, queue: string | null) =>
      runWorkflow === workflow && (version === undefined || (queue !== null && parseVersionQueue(queue).version === version));
    return mergePage(await this.scanIndex(index, offset + limit, keep), limit, offset);
  }

  /**
   * The first `want` entries of an index, newest first, whose run's `workflow` and `queue` fields
   * pass `keep`: read in chunks of 1,000, each with one pipeline of `HMGET`s (a run of version N >
   * 1 waits in "<queue>@v<N>"). `want` Infinity reads the whole index.
   */
  private async scanIndex(
    index: { key: string; status: RunStatus },
    want: number,
    keep: (workflow: string | null, queue: string | null) => boolean,
  ): Promise<ScoredEntry[]> {
    const found: ScoredEntry[] = [];
    for (let start = 0; found.length < want; start += VERSION_SCAN_CHUNK) {
      const flat = await this.redis.zrevrange(index.key, start, start + VERSION_SCAN_CHUNK - 1, 'WITHSCORES');
      const ids = flat.filter((_, i) => i % 2 === 0);
      const values = (await pipelineReplies(
        this.redis,
        ids.map((id) => ['hmget', this.keys.run(id), 'workflow', 'queue']),
      )) as Array<[string | null, string | null]>;
      ids.forEach((id, i) => {
        if (found.length < want && keep(values[i][0], values[i][1])) found.push({ id, indexStatus: index.status, score: Number(flat[2 * i + 1]) });
      });
      if (ids.length < VERSION_SCAN_CHUNK) break;
    }
    return found;
  }

  /**
   * Prunes stale entries of an index (`prune`: the script call); false when none was taken out (or
   * Redis refuses writes: the page is then shown without them, and pruned by a later read).
   */
  private async pruneIndex(prune: () => Promise<number>): Promise<boolean> {
    try {
      return (await prune()) > 0;
    } catch (error) {
      if (error instanceof RedisWriteRefusedError) return false;
      throw error;
    }
  }

  /** True when the `index:wfstatus` marker says the (workflow, status) index covers every run. */
  async runIndexBuilt(): Promise<boolean> {
    return (await this.redis.get(this.keys.workflowStatusIndexMarker())) === RUN_INDEX_VERSION;
  }

  /**
   * Takes the marker to build the index (`force`: even from another builder), with a lease of
   * RUN_INDEX_LEASE_MS. Returns the builder's token, or undefined when another process holds it.
   */
  async takeRunIndexMarker(force: boolean): Promise<string | undefined> {
    const marker = this.keys.workflowStatusIndexMarker();
    const token = `building:${randomBytes(8).toString('hex')}`;
    const taken = force ? await this.redis.set(marker, token, 'PX', RUN_INDEX_LEASE_MS) : await this.redis.set(marker, token, 'PX', RUN_INDEX_LEASE_MS, 'NX');
    return taken === 'OK' ? token : undefined;
  }

  /** Deletes the status indexes no longer kept, then sets the marker: the index is built. */
  async markRunIndexBuilt(): Promise<void> {
    await this.redis.del(...RETIRED_STATUS_INDEXES.map((s) => this.keys.status(s)));
    await this.redis.set(this.keys.workflowStatusIndexMarker(), RUN_INDEX_VERSION);
  }

  /** Names of the workflows that have a runs index, registered or not (a deleted workflow's runs stay). */
  async workflowsWithRuns(): Promise<string[]> {
    const names: string[] = [];
    await scanPrefix(this.redis, this.keys, this.keys.workflowRunsPattern(), async (keys) => {
      for (const key of keys) {
        const name = this.keys.workflowOfRuns(key);
        if (name !== undefined) names.push(name);
      }
    });
    return names.sort();
  }
}
