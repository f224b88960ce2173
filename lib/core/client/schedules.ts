import { cronInputFunction, lastTicks, nextTickOf, nextTicks, runtimeCronId, scheduleIdOf, scheduleOf, type StoredCron } from '../definition/cron';
import { assertKnownKeys, checkInteger, checkTimestamp, checkUserName } from '../definition/option-checks';
import type { CronState, ScheduleOptions, ScheduleState } from '../definition/schedule-types';
import type { WorkflowRegistry } from '../definition/workflow';
import { ConfigurationError } from '../errors';
import type { CronFireResult } from '../store/redis-scripts';
import { encodeInput } from '../store/serialization';
import { cronStateOf } from './run-reader';
import type { WorkflowClient } from './workflow-client';

/** The most ticks one `backfill` fires. */
export const MAX_BACKFILL_TICKS = 1_000;

/** What `trigger` and each tick of `backfill` did: the tick's run started, or why not. */
export interface ScheduleFireResult {
  /** The tick's time (ms): its run's id is `cron.<stored id>.<at>`, and its `ctx.scheduledAt`. */
  at: number;
  /** `fired`; `overlap`: the previous run goes on (overlap `skip` or `buffer-one`); `skipped`: the workflow is at its `maxConcurrency`; `unknown`: the workflow is not registered. */
  outcome: 'fired' | 'overlap' | 'skipped' | 'unknown';
  /** The run of the tick (when it fired, or already existed from an earlier fire of the same tick). */
  runId?: string;
}

/** Which of a runtime schedule and a workflow's trigger of the same id is meant. @default the runtime schedule, if there is one */
export interface ScheduleSource {
  source?: 'runtime' | 'definition';
}

/**
 * Control of schedules: the runtime schedules of `client.schedule` and the `cron` triggers of
 * workflows (`@Cron`) alike, by the id `list()` shows. `createSchedules(client)`, or inject
 * `RedflowSchedules` in Nest. An id names a runtime schedule first, else a trigger.
 */
/**
 * The input JSON of a tick's run, as stored (sealed with the client's codec): the stored input, or
 * what the trigger's input function returns for the tick's time (checked like any input);
 * undefined when `registry` does not define the function. The ticker and `trigger` / `backfill` use it.
 */
export function cronTickInput(client: WorkflowClient, registry: WorkflowRegistry, cronId: string, def: StoredCron, tick: number): string | undefined {
  if (!def.inputFn) return JSON.stringify(def.input ?? null);
  const fn = cronInputFunction(registry, cronId, def);
  if (!fn) return undefined;
  const json = encodeInput(
    def.workflow,
    fn(new Date(tick)),
    `The input cron "${cronId}" computed for its tick at ${new Date(tick).toISOString()}`,
    client.maxPayloadBytes,
  );
  return client.context.payloads.seal(json, { kind: 'input' });
}

export class WorkflowSchedules {
  constructor(private readonly client: WorkflowClient) {}

  /** Adds or replaces a runtime schedule (`client.schedule`). */
  upsert(id: string, options: ScheduleOptions): Promise<ScheduleState> {
    return this.client.schedule(id, options);
  }

  /** Removes a runtime schedule; the runs it started stay. False when there was none. A workflow's trigger is removed with its definition. */
  remove(id: string): Promise<boolean> {
    return this.client.unschedule(id);
  }

  /** Every schedule and trigger, with its next tick, policies and pause. */
  list(): Promise<CronState[]> {
    return this.client.listCrons();
  }

  /** A schedule or trigger by id, or null. */
  async get(id: string, options: ScheduleSource = {}): Promise<CronState | null> {
    const all = (await this.list()).filter((c) => c.id === id && (options.source === undefined || c.source === options.source));
    return all.find((c) => c.source === 'runtime') ?? all[0] ?? null;
  }

  /**
   * Pauses a schedule or trigger: no tick fires until `resume` (across restarts and deploys; the
   * workers' registry sync keeps a trigger paused). `note` says why, for the operator who finds it.
   */
  async pause(id: string, options: { note?: string } & ScheduleSource = {}): Promise<CronState> {
    assertKnownKeys('schedules.pause options', options, ['note', 'source']);
    if (options.note !== undefined) checkUserName(options.note, 'The note of schedules.pause', { max: 1_000 });
    const { cronId } = await this.find(id, options);
    const paused = JSON.stringify({ ...(options.note !== undefined && { note: options.note }), at: this.client.clock.now() });
    await this.client.context.call(() => this.client.scripts.cronPause(cronId, paused, 0));
    return (await this.find(id, options)).state;
  }

  /** Resumes a paused schedule at its first tick after now (ticks missed while paused do not fire). */
  async resume(id: string, options: ScheduleSource = {}): Promise<CronState> {
    assertKnownKeys('schedules.resume options', options, ['source']);
    const { cronId, def } = await this.find(id, options);
    const next = nextTickOf(def, this.client.clock.now());
    await this.client.context.call(() => this.client.scripts.cronPause(cronId, null, next));
    return (await this.find(id, options)).state;
  }

  /**
   * Starts the schedule's run now, as a tick at this time: its overlap policy applies (`skip` and
   * `buffer-one` start nothing while the previous run goes on, `cancel-previous` cancels it). The
   * schedule's own ticks go on unchanged, paused or not.
   */
  async trigger(id: string, options: ScheduleSource = {}): Promise<ScheduleFireResult> {
    assertKnownKeys('schedules.trigger options', options, ['source']);
    const found = await this.find(id, options);
    return this.fire(found, this.client.clock.now());
  }

  /**
   * Fires every tick of the schedule from `from` to `to` (both included, at most 1,000), oldest
   * first, each as its own tick: the same run id a tick fired on time would have had, so a tick
   * that already ran is not run again. The overlap policy applies to each.
   */
  async backfill(id: string, range: { from: Date | number; to: Date | number }): Promise<ScheduleFireResult[]> {
    assertKnownKeys('schedules.backfill range', range, ['from', 'to']);
    const from = checkTimestamp(range.from, 'backfill from');
    const to = checkTimestamp(range.to, 'backfill to');
    if (to < from)
      throw new ConfigurationError(`backfill of schedule "${id}": to (${new Date(to).toISOString()}) is before from (${new Date(from).toISOString()}).`);
    const found = await this.find(id);
    const ticks = nextTicks(found.def.workflow, scheduleOf(found.def), from - 1, MAX_BACKFILL_TICKS + 1).filter((t) => t <= to);
    if (ticks.length > MAX_BACKFILL_TICKS) {
      throw new ConfigurationError(`backfill of schedule "${id}" covers more than ${MAX_BACKFILL_TICKS} ticks: backfill a shorter range at a time.`);
    }
    const results: ScheduleFireResult[] = [];
    for (const tick of ticks) results.push(await this.fire(found, tick));
    return results;
  }

  /**
   * The next `count` fire times of the schedule (as Dates), from now or from `after`, within its
   * `startAt` and `endAt` (fewer when it ends first); for a paused one, as if resumed.
   */
  async preview(id: string, count = 5, after: Date | number = this.client.clock.now()): Promise<Date[]> {
    checkInteger(count, 'The count of schedules.preview', 1, 1_000);
    const { def } = await this.find(id);
    const ticks: Date[] = [];
    for (let at = nextTickOf(def, checkTimestamp(after, 'preview after')); at !== undefined && ticks.length < count; at = nextTickOf(def, at)) {
      ticks.push(new Date(at));
    }
    return ticks;
  }

  /** The fire times of the schedule up to `before` (newest first, at most `count`). */
  async previous(id: string, count = 5, before: Date | number = this.client.clock.now()): Promise<Date[]> {
    checkInteger(count, 'The count of schedules.previous', 1, 1_000);
    const { def } = await this.find(id);
    return lastTicks(def.workflow, scheduleOf(def), checkTimestamp(before, 'previous before'), count).map((t) => new Date(t));
  }

  private async fire(found: { cronId: string; def: StoredCron }, tick: number): Promise<ScheduleFireResult> {
    const { cronId, def } = found;
    const call = {
      cronId,
      tick,
      next: 0,
      workflow: def.workflow,
      input: this.inputOf(cronId, def, tick),
      now: this.client.clock.now(),
      overlap: def.overlap ?? 'skip',
      mode: 'manual' as const,
      limit: undefined,
      priority: def.priority,
    };
    const outcome: CronFireResult = await this.client.context.call(() => this.client.scripts.cronFire(call));
    const runId = `cron.${cronId}.${tick}`;
    if (outcome === 'fired') return { at: tick, outcome, runId };
    return { at: tick, outcome: outcome === 'buffered' ? 'overlap' : (outcome as ScheduleFireResult['outcome']) };
  }

  /** The input JSON of a tick (`cronTickInput`); the trigger's input function must be defined in this process. */
  private inputOf(cronId: string, def: StoredCron, tick: number): string {
    const input = cronTickInput(this.client, this.client.registry, cronId, def, tick);
    if (input === undefined) {
      throw new ConfigurationError(
        `Cron "${cronId}" computes its input with a function of workflow "${def.workflow}", which this client's registry does not define: trigger or backfill it from the app that defines the workflow.`,
      );
    }
    return input;
  }

  /** The stored entry of `id`: a runtime schedule first, else a workflow's trigger; `ConfigurationError` when neither exists. */
  private async find(id: string, { source }: ScheduleSource = {}): Promise<{ cronId: string; def: StoredCron; state: CronState }> {
    checkUserName(id, 'The schedule id');
    const entries = await this.client.context.call(() => this.client.context.registryQueries.crons());
    const runtime = source === 'definition' ? undefined : entries.find((e) => e.cronId === runtimeCronId(id));
    const entry = runtime ?? (source === 'runtime' ? undefined : entries.find((e) => e.cronId === id && scheduleIdOf(e.cronId) === undefined));
    if (!entry) {
      throw new ConfigurationError(`There is no schedule "${id}": schedules.list() shows the ids of runtime schedules and of workflows' cron triggers.`);
    }
    return { cronId: entry.cronId, def: entry.def, state: cronStateOf(entry, this.client.context.payloads) };
  }
}

/** Control of the schedules of the prefix of `client`. */
export function createSchedules(client: WorkflowClient): WorkflowSchedules {
  return new WorkflowSchedules(client);
}
