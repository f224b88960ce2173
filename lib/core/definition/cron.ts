/**
 * Cron triggers and runtime schedules: their ids, their ticks (croner, or a fixed interval), and
 * the JSON a schedule is stored as in Redis (`cron:defs`). Pure; the worker's cron ticker fires
 * the ticks, `cron-fire.lua` makes each tick fire once across workers.
 */
import { Cron } from 'croner';

import { ConfigurationError, InvalidCronError } from '../errors';
import { lastRuleTicks, nextRuleTick, parseCalendarRule, type CalendarRule } from './calendar-rule';
import { checkInteger, checkPriority, checkTimestamp, checkUserName, describeValue } from './option-checks';
import type { ScheduleBounds, SchedulePolicies } from './schedule-types';
import type { CronTrigger, WorkflowDefinition } from './workflow-types';

/** When a schedule ticks: a cron expression (in a time zone), or every `every` ms. */
export type CronSchedule = { expression: string; timezone?: string } | { every: number } | { rrule: string };

/** The schedule of a workflow's trigger (checked by `checkCronTrigger` when the workflow was defined). */
export function triggerSchedule(trigger: CronTrigger): CronSchedule {
  return trigger.rrule !== undefined ? { rrule: trigger.rrule } : { expression: trigger.expression ?? '', timezone: trigger.timezone };
}

/** Checks a workflow's trigger's schedule: an expression (with its time zone) or an rrule, not both. */
export function checkCronTrigger(workflow: string, trigger: CronTrigger, what: string): void {
  if (trigger.rrule !== undefined) {
    if (trigger.expression !== undefined || trigger.timezone !== undefined) {
      throw new ConfigurationError(
        `${what} has an rrule and an expression or timezone: give one of them (an rrule's time zone is the TZID of its DTSTART line).`,
      );
    }
    parseCalendarRule(trigger.rrule, `The rrule of ${what}`);
    return;
  }
  if (typeof trigger.expression !== 'string') {
    throw new ConfigurationError(
      `${what} needs an expression (a cron expression such as "0 9 * * 1-5") or an rrule, got ${describeValue(trigger.expression)}.`,
    );
  }
  parseCron(workflow, { expression: trigger.expression, timezone: trigger.timezone });
}

/** A schedule as stored in Redis: what a worker needs to fire its ticks. */
export interface StoredCron {
  workflow: string;
  /** The cron expression; absent for an interval. */
  expression?: string;
  /** The time zone of the expression; absent for an interval. */
  timezone?: string | null;
  /** The interval in ms; absent for a cron expression. */
  every?: number;
  /** An RFC 5545 calendar rule (runtime schedules): absent otherwise. */
  rrule?: string;
  input: unknown;
  /** Set when the input is a function of the tick's time (a workflow's trigger): `input` is then null. */
  inputFn?: true;
  /** Its policies, only those given (so a schedule stored before they existed reads the same). */
  missed?: SchedulePolicies['missed'];
  missedLimit?: number;
  overlap?: SchedulePolicies['overlap'];
  /** Its bounds in epoch ms, only those given. */
  startAt?: number;
  endAt?: number;
  limit?: number;
  /** The priority of its runs, when given. */
  priority?: number;
}

/** A tick found later than this (ms) was missed: no worker ran when it was due. */
export const MISSED_AFTER_MS = 60_000;

/** The default of `missedLimit`. */
export const DEFAULT_MISSED_LIMIT = 100;

const MISSED = ['skip', 'once', 'all'] as const;
const OVERLAP = ['skip', 'allow', 'cancel-previous', 'buffer-one'] as const;

/** The policies given in `options` (a trigger or schedule options), checked; only those given. */
export function checkSchedulePolicies(options: SchedulePolicies, what: string): SchedulePolicies {
  const policies: SchedulePolicies = {};
  if (options.missed !== undefined) {
    if (!MISSED.includes(options.missed))
      throw new ConfigurationError(`missed of ${what} must be 'skip', 'once' or 'all', got ${describeValue(options.missed)}.`);
    policies.missed = options.missed;
  }
  if (options.missedLimit !== undefined) {
    if (options.missed !== 'all') throw new ConfigurationError(`missedLimit of ${what} applies to missed: 'all' only: set missed: 'all', or drop missedLimit.`);
    policies.missedLimit = checkInteger(options.missedLimit, `missedLimit of ${what}`, 1, 10_000);
  }
  if (options.overlap !== undefined) {
    if (!OVERLAP.includes(options.overlap)) {
      throw new ConfigurationError(`overlap of ${what} must be 'skip', 'allow', 'cancel-previous' or 'buffer-one', got ${describeValue(options.overlap)}.`);
    }
    policies.overlap = options.overlap;
  }
  return policies;
}

/** The bounds given in `options` (a trigger or schedule options), checked, in epoch ms; only those given. */
export function checkScheduleBounds(options: ScheduleBounds, what: string): { startAt?: number; endAt?: number; limit?: number; priority?: number } {
  const bounds: { startAt?: number; endAt?: number; limit?: number; priority?: number } = {};
  if (options.startAt !== undefined) bounds.startAt = checkTimestamp(options.startAt, `startAt of ${what}`);
  if (options.endAt !== undefined) bounds.endAt = checkTimestamp(options.endAt, `endAt of ${what}`);
  if (bounds.startAt !== undefined && bounds.endAt !== undefined && bounds.endAt <= bounds.startAt) {
    throw new ConfigurationError(
      `endAt of ${what} must be after its startAt, got ${new Date(bounds.endAt).toISOString()} <= ${new Date(bounds.startAt).toISOString()}.`,
    );
  }
  if (options.limit !== undefined) bounds.limit = checkInteger(options.limit, `limit of ${what}`, 1, Number.MAX_SAFE_INTEGER);
  if (options.priority !== undefined) bounds.priority = checkPriority(options.priority, `priority of ${what}`);
  return bounds;
}

/**
 * The first tick of a stored schedule after `after`, within its bounds (`startAt`, `endAt`);
 * undefined when it has none left: the schedule has ended.
 */
export function nextTickOf(stored: StoredCron, after: number): number | undefined {
  const from = stored.startAt === undefined ? after : Math.max(after, stored.startAt - 1);
  const next = stored.rrule === undefined ? nextCronTick(stored.workflow, scheduleOf(stored), from) : nextRuleTick(ruleOf(stored.workflow, stored.rrule), from);
  return next === undefined || (stored.endAt !== undefined && next > stored.endAt) ? undefined : next;
}

/** The parsed calendar rule of a schedule of `workflow`. */
function ruleOf(workflow: string, rrule: string): CalendarRule {
  return parseCalendarRule(rrule, `The rrule of a schedule of workflow "${workflow}"`);
}

/** The policies of a stored schedule, only those it has. */
export function policiesOf(stored: StoredCron): SchedulePolicies | undefined {
  const { missed, missedLimit, overlap } = stored;
  if (missed === undefined && missedLimit === undefined && overlap === undefined) return undefined;
  return { ...(missed && { missed }), ...(missedLimit && { missedLimit }), ...(overlap && { overlap }) };
}

/**
 * What the ticker does with a due tick (`tick`, found at `now`), by the schedule's `missed`
 * policy: `fire` it (the schedule then moves to `next`), or move the schedule to `next` without
 * firing (`skip`): missed ticks dropped, or the ones past `missedLimit`.
 */
export function planTick(stored: StoredCron, tick: number, now: number): { fire: boolean; next: number | undefined } {
  const late = now - tick > MISSED_AFTER_MS;
  const missed = stored.missed ?? 'once';
  if (stored.endAt !== undefined && tick > stored.endAt) return { fire: false, next: undefined };
  if (late && missed === 'skip') return { fire: false, next: nextTickOf(stored, now - MISSED_AFTER_MS) };
  if (missed !== 'all') return { fire: true, next: nextTickOf(stored, Math.max(tick, now)) };
  if (late) {
    // Keep the latest `missedLimit` missed ticks: the oldest of them is where firing starts.
    const oldestKept = lastTicks(stored.workflow, scheduleOf(stored), now, stored.missedLimit ?? DEFAULT_MISSED_LIMIT).at(-1);
    if (oldestKept !== undefined && oldestKept > tick && (stored.startAt === undefined || oldestKept >= stored.startAt))
      return { fire: false, next: oldestKept };
  }
  return { fire: true, next: nextTickOf(stored, tick) };
}

/** Up to `count` ticks at or before `at`, newest first. */
export function lastTicks(workflow: string, schedule: CronSchedule, at: number, count: number): number[] {
  if ('rrule' in schedule) return lastRuleTicks(ruleOf(workflow, schedule.rrule), at, count);
  if ('every' in schedule) {
    const last = Math.floor(at / schedule.every) * schedule.every;
    return Array.from({ length: count }, (_, i) => last - i * schedule.every);
  }
  return parseCron(workflow, schedule)
    .previousRuns(count, new Date(at + 1))
    .map((d) => d.getTime());
}

/** The next `count` ticks after `after`, oldest first. */
export function nextTicks(workflow: string, schedule: CronSchedule, after: number, count: number): number[] {
  const ticks: number[] = [];
  let at = after;
  for (let i = 0; i < count; i++) ticks.push((at = nextCronTick(workflow, schedule, at)));
  return ticks;
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
export function parseCron(workflow: string, trigger: { expression: string; timezone?: string }): Cron {
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
  if ('rrule' in schedule) {
    const tick = nextRuleTick(ruleOf(workflow, schedule.rrule), after);
    if (tick === undefined)
      throw new ConfigurationError(`The rrule of a schedule of workflow "${workflow}" has no tick after ${new Date(after).toISOString()}.`);
    return tick;
  }
  const next = parseCron(workflow, schedule).nextRun(new Date(after));
  if (!next) throw new ConfigurationError(`Cron expression "${schedule.expression}" of workflow "${workflow}" has no future tick.`);
  return next.getTime();
}

/** The schedule of a stored trigger. */
export function scheduleOf(stored: StoredCron): CronSchedule {
  if (stored.every !== undefined) return { every: stored.every };
  if (stored.rrule !== undefined) return { rrule: stored.rrule };
  return { expression: stored.expression ?? '', timezone: stored.timezone ?? undefined };
}

/**
 * The stored JSON of a trigger or schedule of `workflow`, with its policies and bounds (checked),
 * if any. `inputInCode`: a static input is not stored either, but read from the definition when
 * a tick fires, as an input function is (a client with a payload codec: no input in clear).
 */
export function encodeCron(
  workflow: string,
  trigger: CronSchedule & { input?: unknown },
  policies: SchedulePolicies & { startAt?: number; endAt?: number; limit?: number; priority?: number } = {},
  inputInCode = false,
): string {
  // A function of the tick's time is called when the tick fires, by a worker that has it.
  const fromCode = typeof trigger.input === 'function' || (inputInCode && trigger.input !== undefined);
  const inputFn = fromCode ? ({ inputFn: true } as const) : {};
  const input = fromCode ? null : (trigger.input ?? null);
  const stored: StoredCron =
    'every' in trigger
      ? { workflow, every: trigger.every, input }
      : 'rrule' in trigger
        ? { workflow, rrule: trigger.rrule, input }
        : { workflow, expression: trigger.expression, timezone: trigger.timezone ?? null, input };
  return JSON.stringify({ ...stored, ...inputFn, ...policies });
}

/** A stored trigger read back (throws `SyntaxError` for text that is not JSON). */
export function decodeCron(json: string): StoredCron {
  return JSON.parse(json) as StoredCron;
}

/**
 * The input function of a workflow's trigger stored as `cronId` (`input` given as a function of
 * the tick's time), from `registry`; undefined when the registry has no such workflow or trigger.
 */
export function cronInputFunction(
  registry: { get(name: string): WorkflowDefinition | undefined },
  cronId: string,
  stored: StoredCron,
): ((at: Date) => unknown) | undefined {
  const definition = registry.get(stored.workflow);
  const index = definition ? cronIds(definition).indexOf(cronId) : -1;
  if (index < 0) return undefined;
  const fn: unknown = definition!.options.cron?.[index]?.input;
  // A static input kept out of Redis (encodeCron's inputInCode).
  return typeof fn === 'function' ? (fn as (at: Date) => unknown) : () => fn ?? null;
}
