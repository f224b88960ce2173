/** Cron schedules: a runtime schedule's options, and the schedules as stored in Redis. */
import type { Duration } from './duration-format';

/**
 * What a schedule does with the ticks it missed while no worker ran, and with a tick that finds
 * its previous run still going. The same for a workflow's `cron` triggers (`@Cron`) and runtime
 * schedules; independent of `maxConcurrency`, which still skips a tick when the workflow is full.
 */
export interface SchedulePolicies {
  /**
   * Ticks found more than a minute late (no worker ran then): `'skip'` drops them and goes on with
   * the next tick; `'once'` fires the first of them, once; `'all'` fires each of them, in order
   * (the latest `missedLimit` at most).
   * @default 'once'
   */
  missed?: 'skip' | 'once' | 'all';
  /** With `missed: 'all'`: the most missed ticks fired, the latest ones. @default 100 */
  missedLimit?: number;
  /**
   * A tick whose schedule's previous run has not ended (queued, running, waiting or compensating):
   * `'skip'` starts nothing; `'allow'` starts another run beside it; `'cancel-previous'` cancels
   * the previous run and starts the new one; `'buffer-one'` starts the tick's run as soon as the
   * previous one ends (one tick waits; the ticks that come meanwhile are dropped).
   * @default 'skip'
   */
  overlap?: 'skip' | 'allow' | 'cancel-previous' | 'buffer-one';
}

/** When a schedule may fire (and the priority of the runs it starts), for `@Cron` triggers and runtime schedules alike. */
export interface ScheduleBounds {
  /** No tick before this time (a Date or epoch ms). @default now */
  startAt?: Date | number;
  /** No tick after this time: the schedule then ends (it stays listed, with no next tick). @default no end */
  endAt?: Date | number;
  /** The most runs its ticks start (`trigger` and `backfill` not counted): the schedule then ends. @default no limit */
  limit?: number;
  /** The priority of the runs it starts (see `RunOptions.priority`). @default the workflow's `priority` */
  priority?: number;
}

/** A cron schedule as registered in Redis: a trigger of a workflow definition, or a runtime schedule. */
export interface CronState {
  /** The trigger's id (`cron[].id`, `@Cron({ id })`, or `<workflow>#<index>`), or the id given to `client.schedule`. */
  id: string;
  /** `definition`: a `cron` trigger of a workflow (or `@Cron`), synced by workers; `runtime`: added by `client.schedule`. */
  source: 'definition' | 'runtime';
  workflow: string;
  /** The cron expression; absent for an `every` schedule. */
  expression?: string;
  /** The interval in ms of an `every` schedule. */
  every?: number;
  /** The calendar rule of an `rrule` schedule. */
  rrule?: string;
  timezone?: string;
  input: unknown;
  /** Epoch ms of the next tick; absent while paused. */
  nextAt?: number;
  /** Its policies, when any was given (defaults: `missed: 'once'`, `overlap: 'skip'`). */
  policies?: SchedulePolicies;
  /** Set while paused (`schedules.pause`), with the note given and when. */
  paused?: { note?: string; at: number };
}

/** Options of `client.schedule`: the workflow, and exactly one of `cron` and `every`. */
export interface ScheduleOptions extends SchedulePolicies, ScheduleBounds {
  /** The workflow each tick starts a run of. */
  workflow: string;
  /** A croner expression (a leading seconds field is allowed), e.g. `"0 9 * * 1-5"`. */
  cron?: string;
  /** An interval of at least 1 s: ms, or a string such as `"30s"`. Ticks fall on its multiples since the epoch. */
  every?: Duration;
  /**
   * An RFC 5545 calendar rule, for what cron cannot say: its DTSTART line first (with a TZID for
   * local times), then its RRULE, e.g. `"DTSTART;TZID=Europe/Paris:20270101T090000\nRRULE:FREQ=MONTHLY;BYDAY=-1FR"`
   * (the last Friday of each month at 09:00 Paris time). Needs the optional peer `rrule`.
   */
  rrule?: string;
  /** The input of every run it starts, validated like `runByName`'s. @default null */
  input?: unknown;
  /** IANA time zone of `cron`. @default the workers' */
  timezone?: string;
}

/** A runtime schedule as stored in Redis (`client.listSchedules`). */
export interface ScheduleState {
  id: string;
  workflow: string;
  /** The cron expression; absent for an `every` schedule. */
  cron?: string;
  /** The interval in ms; absent for a cron schedule. */
  every?: number;
  /** The calendar rule of an `rrule` schedule. */
  rrule?: string;
  timezone?: string;
  input: unknown;
  /** Epoch ms of the next tick; absent while paused. */
  nextAt?: number;
  /** Its policies, when any was given (defaults: `missed: 'once'`, `overlap: 'skip'`). */
  policies?: SchedulePolicies;
  /** Set while paused, with the note given and when. */
  paused?: { note?: string; at: number };
}
