/**
 * Cron triggers and runtime schedules: their ids, their ticks (croner, or a fixed interval), and
 * the JSON a schedule is stored as in Redis (`cron:defs`). Pure; the worker's cron ticker fires
 * the ticks, `cron-fire.lua` makes each tick fire once across workers.
 */
import { Cron } from 'croner';

import { ConfigurationError, InvalidCronError } from '../errors';
import { checkUserName } from './option-checks';
import type { CronTrigger, WorkflowDefinition } from './workflow-types';

/** When a schedule ticks: a cron expression (in a time zone), or every `every` ms. */
export type CronSchedule = Pick<CronTrigger, 'expression' | 'timezone'> | { every: number };

/** A schedule as stored in Redis: what a worker needs to fire its ticks. */
export interface StoredCron {
  workflow: string;
  /** The cron expression; absent for an interval. */
  expression?: string;
  /** The time zone of the expression; absent for an interval. */
  timezone?: string | null;
  /** The interval in ms; absent for a cron expression. */
  every?: number;
  input: unknown;
}

/**
 * The first character of the stored id of every runtime schedule (`client.schedule`), and of no
 * cron trigger of a workflow definition: a trigger's id is `<workflow>#<index>` (workflow names
 * start with a letter or digit) or its own `id`, which may not start with it. So a schedule and
 * a trigger never share an entry of `cron:defs`, and registry sync, which removes only triggers,
 * never removes a schedule. The twin of `is_runtime_cron` in `scripts/includes/cron.lua`.
 */
export const RUNTIME_CRON_MARK = '@';

/** The shortest interval of a schedule's `every`: the cron ticker checks due ticks about once a second. */
export const MIN_EVERY_MS = 1_000;

/** The id of a cron trigger given in a workflow definition (`cron[].id`, `@Cron({ id })`), checked. */
export function checkCronId(value: unknown, what: string): string {
  const id = checkUserName(value, what);
  if (id.startsWith(RUNTIME_CRON_MARK)) {
    throw new ConfigurationError(
      `${what} must not start with "${RUNTIME_CRON_MARK}", got ${JSON.stringify(id)}: that mark is kept for the schedules of client.schedule().`,
    );
  }
  return id;
}

/** The id of each cron trigger of a workflow: its `id`, or `<workflow>#<index>`. */
export function cronIds(definition: WorkflowDefinition<unknown, unknown>): string[] {
  return (definition.options.cron ?? []).map((c, i) => c.id ?? `${definition.name}#${i}`);
}

/** The id in `cron:defs` of the runtime schedule `id`. */
export function runtimeCronId(id: string): string {
  return `${RUNTIME_CRON_MARK}${id}`;
}

/** The schedule id of a stored id, or undefined for a workflow definition's trigger. */
export function scheduleIdOf(cronId: string): string | undefined {
  return cronId.startsWith(RUNTIME_CRON_MARK) ? cronId.slice(RUNTIME_CRON_MARK.length) : undefined;
}

/** A croner schedule, or `InvalidCronError` naming the workflow and the expression. */
export function parseCron(workflow: string, trigger: Pick<CronTrigger, 'expression' | 'timezone'>): Cron {
  try {
    const cron = new Cron(trigger.expression, { timezone: trigger.timezone, paused: true });
    cron.nextRun(); // croner checks the time zone only when it computes a date
    return cron;
  } catch (error) {
    throw new InvalidCronError(workflow, trigger.expression, trigger.timezone, (error as Error).message);
  }
}

/**
 * The first tick of a schedule after `after` (ms). An interval ticks on the multiples of `every`
 * since the epoch, so the tick after a tick that fired on time is that tick + `every`, and a
 * schedule that comes back after a pause resumes at the next multiple after now.
 */
export function nextCronTick(workflow: string, schedule: CronSchedule, after: number): number {
  if ('every' in schedule) return (Math.floor(after / schedule.every) + 1) * schedule.every;
  const next = parseCron(workflow, schedule).nextRun(new Date(after));
  if (!next) throw new ConfigurationError(`Cron expression "${schedule.expression}" of workflow "${workflow}" has no future tick.`);
  return next.getTime();
}

/** The schedule of a stored trigger. */
export function scheduleOf(stored: StoredCron): CronSchedule {
  if (stored.every !== undefined) return { every: stored.every };
  return { expression: stored.expression ?? '', timezone: stored.timezone ?? undefined };
}

/** The stored JSON of a trigger or schedule of `workflow`. */
export function encodeCron(workflow: string, trigger: CronSchedule & { input?: unknown }): string {
  const input = trigger.input ?? null;
  const stored: StoredCron =
    'every' in trigger ? { workflow, every: trigger.every, input } : { workflow, expression: trigger.expression, timezone: trigger.timezone ?? null, input };
  return JSON.stringify(stored);
}

/** A stored trigger read back (throws `SyntaxError` for text that is not JSON). */
export function decodeCron(json: string): StoredCron {
  return JSON.parse(json) as StoredCron;
}
