import { ENDED_STATUSES, type EndedStatus } from '../definition/run-types';
import type { SchedulePolicies } from '../definition/schedule-types';
import type { RedisConnection } from './connection';
import { WaitScripts } from './wait-scripts';

/** A Redis connection: standalone or Cluster. */
export type { RedisConnection };
export type { ClaimedRun, SkippedClaim, FinishResult, FinishOutcome } from './run-scripts';
export type { StepTarget } from './wait-scripts';

/** What `cronFire` did: see `cron-fire-1.lua`. */
export type CronFireResult = 'fired' | 'skipped' | 'overlap' | 'buffered' | 'dropped' | 'taken' | 'unknown';

/**
 * The only place that calls the Lua scripts. Its methods are split by concern along a chain of
 * classes, each extending the one before: `ScriptCaller` (`script-caller.ts`: registration, FCALL
 * or EVALSHA, the ARGV of each call built in the order its script declares), `RunScripts`
 * (`run-scripts.ts`: a run's life), `WaitScripts` (`wait-scripts.ts`: child runs, signals, waits,
 * events) and this class: the registry, crons and schedules, presence, retention and the run
 * index. Each method builds its script's KEYS; keys come from `RedflowKeys` only.
 */
export class RedisScripts extends WaitScripts {
  /**
   * `presence-1.lua`: this worker serves these workflow versions until `expiry` (real time), and
   * is listed in the workers hash with `info` (JSON, with `expiresAt`) until then; or, with expiry
   * 0, no longer serves them and is no longer listed.
   */
  async presence(workerId: string, now: number, expiry: number, versions: Array<[workflow: string, version: number]>, info = ''): Promise<void> {
    await this.call('presence', [this.keys.workflows()], { base: this.keys.base, now, expiry, workerId, info, versions: versions.flat() });
  }

  async syncRegistry(owner: string, now: number, prune: boolean, entries: string[]): Promise<string[]> {
    const k = this.keys;
    const keys = [k.workflows(), k.cronDefs(), k.cronNext()];
    return (await this.call('sync-registry', keys, { base: k.base, owner, now, prune: prune ? '1' : '0', entries })) as string[];
  }

  /**
   * `cron-fire-1.lua`: fires the tick `tick` of cron `cronId` once (mode `tick`), moves past a
   * missed one (`drop`), or fires a tick of `trigger` / `backfill` (`manual`), by its overlap policy.
   */
  async cronFire(a: {
    cronId: string;
    tick: number;
    /** The following tick; undefined when the schedule has ended (`endAt`). */
    next: number | undefined;
    workflow: string;
    input: string;
    now: number;
    overlap: NonNullable<SchedulePolicies['overlap']>;
    mode: 'tick' | 'drop' | 'manual';
    /** The schedule's `limit`, if any. */
    limit: number | undefined;
    /** The schedule's `priority` for its runs, if any. */
    priority: number | undefined;
  }): Promise<CronFireResult> {
    const args = { base: this.keys.base, ...a, next: a.next ?? '', limit: a.limit ?? '', priority: a.priority ?? '' };
    return (await this.call('cron-fire', [this.keys.cronNext()], args)) as CronFireResult;
  }

  /** `cron-pause-1.lua`: pauses cron `cronId` (`paused`: the pause's JSON) or resumes it at `next`. False when it does not exist. */
  async cronPause(cronId: string, paused: string | null, next: number | undefined): Promise<boolean> {
    return (await this.call('cron-pause', [this.keys.cronNext()], { base: this.keys.base, cronId, paused: paused ?? '', next: next ?? '' })) === 1;
  }

  /** `queue-pause-1.lua`: pauses `queue` (`paused`: the pause's JSON) or resumes it (null). True when its state changed. */
  async queuePause(queue: string, paused: string | null): Promise<boolean> {
    return (await this.call('queue-pause', [this.keys.queuesPaused()], { base: this.keys.base, queue, paused: paused ?? '' })) === 1;
  }

  /** `rotate-payload-1.lua`: replaces a stored value read as `old` by `next`, unless it changed meanwhile; true when replaced. */
  async rotatePayload(key: string, type: 'hash' | 'string' | 'list', field: string, old: string, next: string): Promise<boolean> {
    return (await this.call('rotate-payload', [key], { base: this.keys.base, type, field, old, new: next })) === 1;
  }

  /**
   * `schedule-2.lua`: adds or replaces the runtime schedule stored as `cronId`; an unchanged one
   * keeps its next tick. `local`: the caller has the workflow's definition, so it need not be
   * registered in Redis yet.
   */
  async schedule(a: {
    cronId: string;
    def: string;
    /** Its first tick; undefined when it has none (past its `endAt`). */
    next: number | undefined;
    workflow: string;
    local: boolean;
  }): Promise<{ outcome: 'created' | 'replaced' | 'unchanged'; nextAt: number | undefined } | { outcome: 'unknown' } | { outcome: 'dynamic' }> {
    const k = this.keys;
    const args = { base: k.base, cronId: a.cronId, def: a.def, next: a.next ?? '', workflow: a.workflow, local: a.local ? '1' : '0' };
    const [outcome, next] = (await this.call('schedule', [k.cronDefs(), k.cronNext()], args)) as [string, string?];
    if (outcome === 'unknown') return { outcome };
    if (outcome === 'dynamic') return { outcome };
    // A paused schedule has no next tick.
    return { outcome: outcome as 'created', nextAt: next === undefined || next === null ? undefined : Number(next) };
  }

  /** `unschedule-2.lua`: removes the runtime schedule stored as `cronId`; false when there was none. */
  async unschedule(cronId: string): Promise<boolean> {
    const k = this.keys;
    return Number(await this.call('unschedule', [k.cronDefs(), k.cronNext()], { base: k.base, cronId })) === 1;
  }

  async cleanup(cutoff: number, batch: number): Promise<number> {
    const k = this.keys;
    // In this order: the script takes each index to be that of its status.
    return Number(
      await this.call(
        'cleanup',
        ENDED_STATUSES.map((status) => k.status(status)),
        { base: k.base, cutoff, batch },
      ),
    );
  }

  /**
   * `prune-4.lua`: deletes up to `batch` ended runs of `statuses` that finished before `cutoff`,
   * read from the status indexes or, with `workflow`, from that workflow's (workflow, status)
   * indexes. Returns the runs deleted and the index entries taken (a full batch: call again).
   */
  async prune(a: { cutoff: number; batch: number; statuses: ReadonlySet<EndedStatus>; workflow?: string }): Promise<{ deleted: number; taken: number }> {
    const k = this.keys;
    // In this order: the script takes each index to be that of its status.
    const indexes = ENDED_STATUSES.map((status) => (a.workflow ? k.workflowStatusRuns(status, a.workflow) : k.status(status)));
    const flag = (status: EndedStatus) => (a.statuses.has(status) ? '1' : '0');
    const [deleted, taken] = (await this.call('prune', indexes, {
      base: k.base,
      cutoff: a.cutoff,
      batch: a.batch,
      succeeded: flag('succeeded'),
      failed: flag('failed'),
      canceled: flag('canceled'),
      terminated: flag('terminated'),
    })) as [number, number];
    return { deleted: Number(deleted), taken: Number(taken) };
  }

  /**
   * Indexes one chunk of a workflow's runs by (workflow, status) while `token` holds the index
   * marker. Returns the next ZSCAN cursor ('0': the workflow is done), or null when the marker is
   * no longer the caller's.
   */
  async backfillRunIndex(a: {
    workflow: string;
    token: string;
    leaseMs: number;
    cursor: string;
    count: number;
  }): Promise<{ cursor: string; indexed: number } | null> {
    const k = this.keys;
    const keys = [k.workflowStatusIndexMarker(), k.workflowRuns(a.workflow)];
    const args = { base: k.base, token: a.token, leaseMs: a.leaseMs, cursor: a.cursor, count: a.count };
    const reply = (await this.call('backfill-run-index', keys, args)) as [string, number];
    return reply[0] === 'lost' ? null : { cursor: String(reply[0]), indexed: Number(reply[1]) };
  }

  /** Takes out of a (workflow, status) index those of `runIds` that left that status or no longer exist. */
  async pruneRunIndex(status: string, workflow: string, runIds: string[]): Promise<number> {
    const k = this.keys;
    return Number(await this.call('prune-run-index', [k.workflowStatusRuns(status, workflow)], { base: k.base, status, wait: '', runIds }));
  }

  /**
   * Takes out of the waiting index `key` those of `runIds` that are no longer scheduled or whose
   * `wait` field no longer starts with `waitStart`.
   */
  async pruneWaitIndex(key: string, waitStart: string, runIds: string[]): Promise<number> {
    return Number(await this.call('prune-run-index', [key], { base: this.keys.base, status: 'scheduled', wait: waitStart, runIds }));
  }
}
