/** Cron schedules: a runtime schedule's options, and the schedules as stored in Redis. */
import type { Duration } from './duration-format';

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
  timezone?: string;
  input: unknown;
  /** Epoch ms of the next tick. */
  nextAt?: number;
}

/** Options of `client.schedule`: the workflow, and exactly one of `cron` and `every`. */
export interface ScheduleOptions {
  /** The workflow each tick starts a run of. */
  workflow: string;
  /** A croner expression (a leading seconds field is allowed), e.g. `"0 9 * * 1-5"`. */
  cron?: string;
  /** An interval of at least 1 s: ms, or a string such as `"30s"`. Ticks fall on its multiples since the epoch. */
  every?: Duration;
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
  timezone?: string;
  input: unknown;
  /** Epoch ms of the next tick. */
  nextAt?: number;
}
