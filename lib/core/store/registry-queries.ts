import { decodeCron, type StoredCron } from '../definition/cron';
import { parseVersionQueue } from '../definition/option-checks';
import type { QueuePause, QueueStats, WorkerInfo } from '../definition/stats-types';
import type { WorkflowMeta, WorkflowVersionState } from '../definition/workflow-types';
import type { RedisConnection } from './connection';
import type { RedflowKeys } from './keys';
import { pipelineReplies } from './run-queries';

/** Ids read from the head of a ready list to find its oldest queued run (ids of runs canceled while queued may come first). */
const READY_HEAD = 10;

/** One entry of `cron:defs`, decoded, with its next tick from `cron:next`. */
export interface StoredCronEntry {
  cronId: string;
  def: StoredCron;
  nextAt?: number;
  /** Set while paused. */
  paused?: { note?: string; at: number };
}

/**
 * Reads of what a prefix holds besides runs: the workflow registry and the versions workers
 * serve, cron schedules, queue depths, and the dashboard's token secret.
 */
/** The pauses of a paused queues or crons hash; an entry that is not a pause's JSON still pauses, with no time. */
function parsePauses(hash: Record<string, string>): Record<string, QueuePause> {
  const pauses: Record<string, QueuePause> = {};
  for (const [queue, json] of Object.entries(hash)) {
    let parsed: { at?: unknown; note?: unknown } = {};
    try {
      parsed = JSON.parse(json) as typeof parsed;
    } catch {
      // A hand-written entry: paused all the same.
    }
    pauses[queue] = { at: typeof parsed.at === 'number' ? parsed.at : 0, ...(typeof parsed.note === 'string' && { note: parsed.note }) };
  }
  return pauses;
}

export class RegistryQueries {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: RedflowKeys,
    /** True when runs of a workflow's version are not over (RunListQueries.hasUnfinishedRuns). */
    private readonly hasUnfinishedRuns: (workflow: string, version: number) => Promise<boolean>,
  ) {}

  /** Names of the workflows registered in Redis, sorted. */
  async workflowNames(): Promise<string[]> {
    return (await this.redis.smembers(this.keys.workflows())).sort();
  }

  /** The queue stored for a workflow (`<queue>@v<N>` for a version N > 1), or null when it is not registered. */
  workflowQueue(name: string): Promise<string | null> {
    return this.redis.hget(this.keys.workflow(name), 'queue');
  }

  /** A workflow's registry entry with the versions workers serve, or null when it is not registered. */
  async workflowMeta(name: string): Promise<WorkflowMeta | null> {
    const [h, versions] = await Promise.all([this.redis.hgetall(this.keys.workflow(name)), this.redis.hgetall(this.keys.workflowVersions(name))]);
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

  /**
   * The versions of a workflow from its `wfversions:` hash: live workers per version, and for a
   * version with none, `noWorker` when runs started on it are not over (counted by version).
   */
  private async versionStates(workflow: string, fields: Record<string, string>): Promise<WorkflowVersionState[]> {
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
   * Cron ticks due at `now`, oldest first, at most `limit`: each trigger's id, its due tick, and
   * its stored definition (null when it was removed meanwhile), undecoded.
   */
  async dueCrons(now: number, limit: number): Promise<Array<{ cronId: string; tick: number; def: string | null }>> {
    const due = await this.redis.zrangebyscore(this.keys.cronNext(), '-inf', now, 'WITHSCORES', 'LIMIT', 0, limit);
    if (!due.length) return [];
    const ids = due.filter((_, i) => i % 2 === 0);
    const defs = await this.redis.hmget(this.keys.cronDefs(), ...ids);
    return ids.map((cronId, i) => ({ cronId, tick: Number(due[2 * i + 1]), def: defs[i] }));
  }

  /** When the next cron tick of the prefix is due, if there is one. */
  async nextCronTick(): Promise<number | undefined> {
    const [, nextTick] = await this.redis.zrange(this.keys.cronNext(), 0, '0', 'WITHSCORES');
    return nextTick === undefined ? undefined : Number(nextTick);
  }

  /** Every entry of `cron:defs`, decoded, with its next tick from `cron:next`. */
  async crons(): Promise<StoredCronEntry[]> {
    const [defs, next, paused] = await Promise.all([
      this.redis.hgetall(this.keys.cronDefs()),
      this.redis.zrange(this.keys.cronNext(), 0, '-1', 'WITHSCORES'),
      this.redis.hgetall(this.keys.cronPaused()),
    ]);
    const nextById = new Map<string, number>();
    for (let i = 0; i < next.length; i += 2) nextById.set(next[i], Number(next[i + 1]));
    const pauses = parsePauses(paused);
    return Object.entries(defs).map(([cronId, json]) => ({
      cronId,
      def: decodeCron(json),
      nextAt: nextById.get(cronId),
      ...(pauses[cronId] && { paused: pauses[cronId] }),
    }));
  }

  /** The paused queues, by name. */
  async pausedQueues(): Promise<Record<string, QueuePause>> {
    return parsePauses(await this.redis.hgetall(this.keys.queuesPaused()));
  }

  /**
   * The depth of the queues of the registered workflows, and of each of `asked` (all queues when
   * `onlyAsked` is false): two round trips for the registry and the counts (LLEN, ZCARD, a short
   * LRANGE, the priority zset's ZCARD per queue, an LLEN per concurrency key with runs waiting,
   * one ZCARD per registered workflow), one for the head runs.
   */
  async queueStats(asked: string[], onlyAsked: boolean): Promise<QueueStats[]> {
    const [workflows, pausedJson, groups] = await Promise.all([
      this.redis.smembers(this.keys.workflows()),
      this.redis.hgetall(this.keys.queuesPaused()),
      this.redis.hgetall(this.keys.groups()),
    ]);
    const paused = parsePauses(pausedJson);
    const queueOf = await pipelineReplies(
      this.redis,
      workflows.map((w) => ['hget', this.keys.workflow(w), 'queue']),
    );
    const byQueue = new Map<string, string[]>(asked.map((q) => [q, []]));
    workflows.forEach((workflow, i) => {
      const queue = queueOf[i] as string | null;
      if (!queue || (onlyAsked && !byQueue.has(queue))) return;
      byQueue.set(queue, [...(byQueue.get(queue) ?? []), workflow]);
    });
    // A paused queue is listed even when no workflow is registered on it any more.
    if (!onlyAsked) for (const queue of Object.keys(paused)) if (!byQueue.has(queue)) byQueue.set(queue, []);
    const queues = [...byQueue.keys()].sort();
    const places = readyListPlaces(groups);
    const counts = await pipelineReplies(
      this.redis,
      queues.flatMap((q) => [
        ['llen', this.keys.ready(q)],
        ['zcard', this.keys.scheduled(q)],
        ['lrange', this.keys.ready(q), '0', String(READY_HEAD - 1)],
        ['zcard', this.keys.priority(q)],
        ...(places.get(q)?.groups ?? []).map((group) => ['llen', this.keys.groupRuns(group)]),
        ...byQueue.get(q)!.map((w) => ['zcard', this.keys.workflowStatusRuns('running', w)]),
      ]),
    );
    let at = 0;
    const rows = queues.map((queue) => {
      const place = places.get(queue) ?? { groups: [], marks: 0 };
      const [listed, scheduled, head, prioritized] = counts.slice(at, at + 4) as [number, number, string[], number];
      at += 4;
      const sum = (n: number) => (counts.slice(at, (at += n)) as number[]).reduce((total, count) => total + Number(count), 0);
      // The ready list holds run ids and marks (one per key with a place, the priority mark): the
      // queued runs are its ids, the priority zset and the lists of the keys.
      const queued = Number(listed) - place.marks + Number(prioritized) + sum(place.groups.length);
      const running = sum(byQueue.get(queue)!.length);
      return { queue, queued, scheduled: Number(scheduled), running, head };
    });
    const heads = rows.flatMap((r) => r.head);
    const fields = await pipelineReplies(
      this.redis,
      heads.map((id) => ['hmget', this.keys.run(id), 'status', 'availableAt', 'createdAt']),
    );
    const headRun = new Map(heads.map((id, i) => [id, fields[i] as Array<string | null>]));
    return rows.map(({ head, ...row }): QueueStats => {
      const first = head.map((id) => headRun.get(id)).find((f) => f?.[0] === 'queued');
      const pause = paused[row.queue];
      return { ...row, oldestQueuedAt: first ? Number(first[1] ?? first[2]) : null, ...(pause && { paused: pause }) };
    });
  }

  /** The workers whose entry in the workers hash has not lapsed at `now` (real time), by id. */
  async workers(now: number): Promise<WorkerInfo[]> {
    const entries = await this.redis.hgetall(this.keys.workers());
    const workers: WorkerInfo[] = [];
    for (const json of Object.values(entries)) {
      try {
        const info = JSON.parse(json) as WorkerInfo;
        if (info && typeof info === 'object' && Number(info.expiresAt) >= now) workers.push(info);
      } catch {
        // An entry that is not JSON is no worker; the next presence call drops it.
      }
    }
    return workers.sort((a, b) => String(a.workerId).localeCompare(String(b.workerId)));
  }

  /**
   * The dashboard's token secret, one per prefix for every replica: the stored one, else
   * a new one from `create` once stored (the first replica to store one wins); undefined when Redis
   * stored none.
   */
  async dashboardSecret(create: () => string): Promise<string | undefined> {
    const key = this.keys.dashboardSecret();
    const existing = await this.redis.get(key);
    if (existing) return existing;
    await this.redis.set(key, create(), 'NX');
    return (await this.redis.get(key)) ?? undefined;
  }
}

/**
 * Per queue, from the `groups` hash (ready.lua): the concurrency keys with runs waiting (in the
 * ready list or out of it at their limit), and how many marks its ready list holds.
 */
function readyListPlaces(groups: Record<string, string>): Map<string, { groups: string[]; marks: number }> {
  const places = new Map<string, { groups: string[]; marks: number }>();
  const of = (queue: string) => places.get(queue) ?? places.set(queue, { groups: [], marks: 0 }).get(queue)!;
  for (const [field, value] of Object.entries(groups)) {
    if (field.startsWith('\u0001p')) {
      of(field.slice(2)).marks++;
    } else if (value.startsWith('r|') || value.startsWith('p|')) {
      const place = of(value.slice(2));
      place.groups.push(field);
      if (value.startsWith('r|')) place.marks++;
    }
  }
  return places;
}
