import { parseVersionQueue } from '../definition/option-checks';
import { ENDED_STATUSES, RUN_STATUSES, TERMINAL_STATUSES, type RunStatus } from '../definition/run-types';
import type { RedisConnection } from './connection';
import type { RedflowKeys } from './keys';
import { pipelineReplies } from './run-queries';

/** One run index a browse reads: its key, the status of its runs, and what its score is. */
export interface BrowseIndex {
  key: string;
  status: RunStatus;
  /** `created`: creation ms (a workflow's live statuses); `finished`: finish ms (ended statuses); `lease`: lease expiry (`leases`). */
  scoredBy: 'created' | 'finished' | 'lease';
}

/** An index entry of a browse page: a run id, the status of the index it came from, its score. */
export interface BrowseEntry {
  id: string;
  indexStatus: RunStatus;
  score: number;
}

/** Which entries of the indexes a browse page takes. */
export interface BrowseRange {
  /** `newest`: highest score first (as `listRuns`); `oldest`: lowest first. */
  order: 'newest' | 'oldest';
  offset: number;
  count: number;
  /** Creation time bounds (ms, `max` exclusive), applied in Redis where an index is scored by it (see `scoreBounds`). */
  createdFrom?: number;
  createdBefore?: number;
}

/** Runs per ended status a count of recent ends reads. */
const ENDED: readonly RunStatus[] = [...ENDED_STATUSES, 'compensation_failed'];

/**
 * The score bounds of `range` on `index`: an index scored by creation takes both; one scored by
 * finish time takes `createdFrom` only (a run finishes after it was created); the leases zset
 * neither. Whatever is not applied here is checked on each run's `createdAt` by the caller.
 */
function scoreBounds(index: BrowseIndex, range: BrowseRange): { min: string; max: string } {
  const from = range.createdFrom;
  const before = range.createdBefore;
  if (index.scoredBy === 'created') return { min: from === undefined ? '-inf' : String(from), max: before === undefined ? '+inf' : `(${before}` };
  if (index.scoredBy === 'finished') return { min: from === undefined ? '-inf' : String(from), max: '+inf' };
  return { min: '-inf', max: '+inf' };
}

/**
 * Reads for browsing runs as the dashboard does: pages of the run indexes in either order, over a
 * set of workflows, within a creation time range; the workflows of a queue; the run of an
 * idempotency key; runs ended recently. The index layout is `RunListQueries`' (keys.ts), read the
 * same way: one index by rank, several merged by score.
 */
export class RunBrowseQueries {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: RedflowKeys,
  ) {}

  /**
   * The indexes holding the runs of `workflows` (undefined: every workflow) in `status` (undefined:
   * every status), as `RunListQueries` picks them: without workflows, ended statuses have their
   * status index, running runs the leases zset, and the other live statuses one (workflow, status)
   * index per workflow that has runs.
   */
  async indexes(workflows: readonly string[] | undefined, status: RunStatus | undefined): Promise<BrowseIndex[]> {
    const statuses = status ? [status] : RUN_STATUSES;
    const scored = (s: RunStatus): BrowseIndex['scoredBy'] => (TERMINAL_STATUSES.has(s) ? 'finished' : 'created');
    if (workflows) return workflows.flatMap((w) => statuses.map((s) => ({ key: this.keys.workflowStatusRuns(s, w), status: s, scoredBy: scored(s) })));
    let names: string[] | undefined;
    const indexes: BrowseIndex[] = [];
    for (const s of statuses) {
      if (TERMINAL_STATUSES.has(s)) indexes.push({ key: this.keys.status(s), status: s, scoredBy: 'finished' });
      else if (s === 'running') indexes.push({ key: this.keys.leases(), status: s, scoredBy: 'lease' });
      else {
        names ??= (await this.redis.smembers(this.keys.workflowNames())).sort();
        for (const name of names) indexes.push({ key: this.keys.workflowStatusRuns(s, name), status: s, scoredBy: 'created' });
      }
    }
    return indexes;
  }

  /**
   * Entries `offset` to `offset + count` of the indexes in `order`. One index without a time
   * range: that slice by rank, O(log N + count). Otherwise the first `offset + count` entries of
   * each index (within its score bounds), merged by score, an id listed twice shown once:
   * O(indexes × (offset + count)).
   */
  async entries(indexes: readonly BrowseIndex[], range: BrowseRange): Promise<BrowseEntry[]> {
    const { order, offset, count } = range;
    if (!indexes.length || count <= 0) return [];
    const ranged = range.createdFrom !== undefined || range.createdBefore !== undefined;
    if (indexes.length === 1 && !ranged) {
      const [index] = indexes;
      const end = String(offset + count - 1);
      const flat =
        order === 'newest' ? await this.redis.zrevrange(index.key, offset, end, 'WITHSCORES') : await this.redis.zrange(index.key, offset, end, 'WITHSCORES');
      return pairs(flat, index.status);
    }
    const want = String(offset + count);
    const replies = (await pipelineReplies(
      this.redis,
      indexes.map((index) => {
        const { min, max } = scoreBounds(index, range);
        return order === 'newest'
          ? ['zrevrangebyscore', index.key, max, min, 'WITHSCORES', 'LIMIT', '0', want]
          : ['zrangebyscore', index.key, min, max, 'WITHSCORES', 'LIMIT', '0', want];
      }),
    )) as string[][];
    const merged = replies.flatMap((flat, i) => pairs(flat, indexes[i].status));
    merged.sort(order === 'newest' ? (a, b) => b.score - a.score : (a, b) => a.score - b.score);
    const seen = new Set<string>();
    return merged.filter(({ id }) => !seen.has(id) && seen.add(id)).slice(offset, offset + count);
  }

  /** The registered workflows whose queue (any version of it) is `queue`, sorted. */
  async workflowsOnQueue(queue: string): Promise<string[]> {
    const queues = await this.workflowQueues();
    return [...queues].filter(([, stored]) => parseVersionQueue(stored).queue === queue).map(([w]) => w);
  }

  /** The registered workflows and the queue stored for each (`<queue>@v<N>` for a version N > 1), by name. */
  async workflowQueues(): Promise<Map<string, string>> {
    const names = (await this.redis.smembers(this.keys.workflows())).sort();
    const queues = await pipelineReplies(
      this.redis,
      names.map((w) => ['hget', this.keys.workflow(w), 'queue']),
    );
    const byName = new Map<string, string>();
    names.forEach((w, i) => queues[i] && byName.set(w, queues[i] as string));
    return byName;
  }

  /**
   * The run an idempotency key of one of `workflows` (undefined: every registered workflow and
   * every workflow with runs) stands for, while the key lives (its TTL), and how many keys were
   * read: one GET per workflow, in one round trip.
   */
  async idempotentRun(key: string, workflows: readonly string[] | undefined): Promise<{ runId?: string; keys: number }> {
    if (key.includes('\n')) return { keys: 0 };
    const names =
      workflows ?? [...new Set([...(await this.redis.smembers(this.keys.workflows())), ...(await this.redis.smembers(this.keys.workflowNames()))])].sort();
    const values = await pipelineReplies(
      this.redis,
      names.map((w) => ['get', this.keys.idempotency(w, key)]),
    );
    const value = values.find((v) => typeof v === 'string') as string | undefined;
    return { runId: value?.split('|')[0] || undefined, keys: names.length };
  }

  /**
   * Runs of each of `workflows` that ended (any ended status) at or after `since` (ms): one
   * ZCOUNT per workflow and ended status of its (workflow, status) index, scored by finish time,
   * in one round trip.
   */
  async endedSince(workflows: readonly string[], since: number): Promise<Map<string, number>> {
    const replies = await pipelineReplies(
      this.redis,
      workflows.flatMap((w) => ENDED.map((s) => ['zcount', this.keys.workflowStatusRuns(s, w), String(since), '+inf'])),
    );
    const counts = new Map<string, number>();
    workflows.forEach((w, i) =>
      counts.set(
        w,
        replies.slice(i * ENDED.length, (i + 1) * ENDED.length).reduce((sum: number, n) => sum + Number(n), 0),
      ),
    );
    return counts;
  }
}

function pairs(flat: string[], status: RunStatus): BrowseEntry[] {
  const entries: BrowseEntry[] = [];
  for (let i = 0; i < flat.length; i += 2) entries.push({ id: flat[i], indexStatus: status, score: Number(flat[i + 1]) });
  return entries;
}
