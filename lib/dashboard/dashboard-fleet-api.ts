import type { IncomingHttpHeaders } from 'node:http';

import { createQueues } from '../core/client/queues';
import { createSchedules, type WorkflowSchedules } from '../core/client/schedules';
import { nextCronTick, scheduleOf } from '../core/definition/cron';
import type { RunSummary } from '../core/definition/run-types';
import type { CronState } from '../core/definition/schedule-types';
import { ConfigurationError, UnknownWorkflowError } from '../core/errors';
import { DashboardHttpError } from './dashboard-http-error';
import { badRequest, param, type DashboardContext, type DashboardQuery } from './dashboard-query';

/** How far back `ended5m` counts. */
const ENDED_WINDOW_MS = 5 * 60_000;
/** Next fire times and last runs shown per schedule. */
const SCHEDULE_ROWS = 5;
/** The workflow's newest runs among which a schedule's last runs are looked for. */
const SCHEDULE_RUNS_READ = 50;

/** What the fleet routes need from `DashboardApi`: the action checks (read-only, anti-CSRF). */
export interface FleetHost extends DashboardContext {
  checkActionHeaders(headers: IncomingHttpHeaders): Promise<void>;
}

/** The next `count` ticks of a schedule from its stored next tick; none while paused or once it has ended. */
function nextTicks(cron: CronState, count: number, now: number): number[] {
  const ticks: number[] = [];
  if (cron.paused || cron.nextAt === undefined) return ticks;
  try {
    const schedule = scheduleOf({
      workflow: cron.workflow,
      expression: cron.expression,
      timezone: cron.timezone,
      every: cron.every,
      rrule: cron.rrule,
      input: null,
    });
    let tick = cron.nextAt ?? nextCronTick(cron.workflow, schedule, now);
    while (ticks.length < count) {
      ticks.push(tick);
      tick = nextCronTick(cron.workflow, schedule, tick);
    }
  } catch {
    // An expression with no further tick: the ticks found so far.
  }
  return ticks;
}

/** The stored id of a cron in the run ids its ticks start: `cron.<stored id>.<tick>` (cron-fire-1.lua). */
function tickRunPrefix(cron: CronState): string {
  return `cron.${cron.source === 'runtime' ? '@' : ''}${cron.id}.`;
}

/** The fleet: queues, workers, workflow versions and schedules; and starting a schedule's workflow now. */
export class FleetPages {
  constructor(private readonly host: FleetHost) {}

  /**
   * `GET /api/queues`: `getQueueStats` per queue, with `ended5m` (runs of the workflows registered
   * on the queue that ended in the last 5 minutes: a ZCOUNT per workflow and ended status),
   * `paused` and, when paused, `pause` (`{ note?, at }`).
   */
  async queues() {
    const { client } = this.host;
    const { browseQueries } = client.context;
    const [stats, queueOf] = await this.host.read(() => Promise.all([client.getQueueStats(), client.context.call(() => browseQueries.workflowQueues())]));
    const since = client.clock.now() - ENDED_WINDOW_MS;
    const ended = await this.host.read(() => client.context.call(() => browseQueries.endedSince([...queueOf.keys()], since)));
    return {
      queues: stats.map((row) => {
        const workflows = [...queueOf].filter(([, queue]) => queue === row.queue).map(([w]) => w);
        const { paused, ...counts } = row;
        return {
          ...counts,
          workflows,
          ended5m: workflows.reduce((sum, w) => sum + (ended.get(w) ?? 0), 0),
          paused: paused !== undefined,
          ...(paused && { pause: paused }),
        };
      }),
    };
  }

  /** `GET /api/workers`: the live workers (`client.listWorkers()`). */
  async workers() {
    return { workers: await this.host.read(() => this.host.client.listWorkers()) };
  }

  /**
   * `GET /api/versions`: per registered workflow, each version workers served with its live workers
   * and whether runs started on it are not over (`hasUnfinishedRuns`), and `missing`: the versions
   * with unfinished runs and no live worker.
   */
  async versions() {
    const { client } = this.host;
    const workflows = await this.host.read(() => client.listWorkflows());
    return {
      workflows: await Promise.all(
        workflows.map(async (w) => {
          const versions = await Promise.all(
            w.versions.map(async (v) => ({
              version: v.version,
              workers: v.workers,
              updatedAt: v.updatedAt,
              unfinished: await this.host.read(() => client.hasUnfinishedRuns(w.name, v.version)),
            })),
          );
          return {
            name: w.name,
            queue: w.queue,
            latest: w.version,
            versions,
            missing: versions.filter((v) => v.unfinished && !v.workers.length).map((v) => v.version),
          };
        }),
      ),
    };
  }

  /**
   * `GET /api/schedules`: the crons of workflow definitions and the runtime schedules
   * (`listCrons`), each with its next 5 ticks and its last 5 runs: the runs its ticks started
   * (ids `cron.<id>.<tick>`) among the workflow's 50 newest. Inputs are not shown.
   */
  async schedules() {
    const { client } = this.host;
    const crons = await this.host.read(() => client.listCrons());
    const now = client.clock.now();
    const recent = new Map<string, Promise<RunSummary[]>>();
    const runsOf = (workflow: string) => {
      if (!recent.has(workflow))
        recent.set(
          workflow,
          this.host.read(() => client.listRunSummaries({ workflow, limit: SCHEDULE_RUNS_READ })),
        );
      return recent.get(workflow)!;
    };
    return {
      schedules: await Promise.all(
        crons.map(async ({ input: _input, ...cron }) => {
          const prefix = tickRunPrefix({ ...cron, input: undefined });
          const lastRuns = (await runsOf(cron.workflow)).filter((r) => r.id.startsWith(prefix)).slice(0, SCHEDULE_ROWS);
          return { ...cron, next: nextTicks({ ...cron, input: undefined }, SCHEDULE_ROWS, now), lastRuns: lastRuns.map((r) => this.host.redactRow(r)) };
        }),
      ),
    };
  }

  /**
   * `POST /api/schedules/trigger?id=&source=`: a tick of the schedule now, under its overlap
   * policy (`schedules.trigger`): 201 `{ runId }`, or 409 when it started nothing (the previous
   * run goes on, the workflow is full or not registered), saying why.
   */
  async trigger(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ runId: string }> {
    const { id, source } = await this.scheduleAction(query, headers);
    const fired = await this.controlCall(() => this.control.trigger(id, { source }));
    if (fired.outcome === 'fired') return { runId: fired.runId! };
    const why = {
      overlap: `its previous run goes on, and its overlap policy starts no other`,
      skipped: `its workflow is at its maxConcurrency`,
      unknown: `its workflow is not registered`,
    }[fired.outcome];
    throw new DashboardHttpError(409, fired.outcome === 'unknown' ? 'UNKNOWN_WORKFLOW' : 'NOT_STARTED', `Schedule "${id}" started nothing: ${why}.`);
  }

  /** `POST /api/schedules/pause?id=&source=&note=`: pauses the schedule (`schedules.pause`); its state. */
  async pause(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<CronState> {
    const { id, source } = await this.scheduleAction(query, headers);
    const note = param(query, 'note');
    return this.controlCall(() => this.control.pause(id, { source, ...(note ? { note } : {}) }));
  }

  /** `POST /api/schedules/resume?id=&source=`: resumes the schedule at its first tick after now; its state. */
  async resume(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<CronState> {
    const { id, source } = await this.scheduleAction(query, headers);
    return this.controlCall(() => this.control.resume(id, { source }));
  }

  /** `POST /api/queues/pause?queue=&note=` and `/resume?queue=`: pauses or resumes a queue (`WorkflowQueues`); whether its state changed. */
  async pauseQueue(query: DashboardQuery, headers: IncomingHttpHeaders, pause: boolean): Promise<{ queue: string; paused: boolean; changed: boolean }> {
    await this.host.checkActionHeaders(headers);
    const queue = param(query, 'queue');
    if (queue === undefined) throw badRequest('Give the queue as the query parameter "queue".');
    const note = param(query, 'note');
    const queues = createQueues(this.host.client);
    const changed = await this.controlCall(() => (pause ? queues.pause(queue, note ? { note } : {}) : queues.resume(queue)));
    return { queue, paused: pause, changed };
  }

  private get control(): WorkflowSchedules {
    return createSchedules(this.host.client);
  }

  /** The schedule an action names, after the action checks (read-only, anti-CSRF); 404 when there is none, 400 when two share the id. */
  private async scheduleAction(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ id: string; source?: 'runtime' | 'definition' }> {
    await this.host.checkActionHeaders(headers);
    const id = param(query, 'id');
    if (id === undefined) throw badRequest('Give the schedule id as the query parameter "id".');
    const source = param(query, 'source');
    if (source !== undefined && source !== 'definition' && source !== 'runtime')
      throw badRequest('The query parameter "source" must be definition or runtime.');
    const found = (await this.host.read(() => this.host.client.listCrons())).filter((c) => c.id === id && (source === undefined || c.source === source));
    if (!found.length) throw new DashboardHttpError(404, 'NOT_FOUND', `No schedule "${id}".`);
    if (found.length > 1) throw badRequest(`Both a cron of a definition and a runtime schedule are named "${id}": give source=definition or source=runtime.`);
    return { id, source: found[0].source };
  }

  /** A schedule or queue control call, with a ConfigurationError (a bad note or name, an input function not defined here) as a 400. */
  private async controlCall<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await this.host.read(call);
    } catch (error) {
      if (error instanceof UnknownWorkflowError) throw new DashboardHttpError(409, 'UNKNOWN_WORKFLOW', error.message);
      if (error instanceof ConfigurationError) throw badRequest(error.message);
      throw error;
    }
  }
}
