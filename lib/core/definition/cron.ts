/**
 * Cron triggers: their ids, their schedules (croner), and the JSON a trigger is stored as in
 * Redis (`cron:defs`). Pure; the worker's cron ticker fires the ticks, `cron-fire.lua` makes each
 * tick fire once across workers.
 */
import { Cron } from 'croner';
import { ConfigurationError, InvalidCronError } from '../errors';
import type { CronTrigger, WorkflowDefinition } from './workflow-types';

/** A cron trigger as stored in Redis: what a worker needs to fire its ticks. */
export interface StoredCron {
  workflow: string;
  expression: string;
  timezone: string | null;
  input: unknown;
}

/** The id of each cron trigger of a workflow: its `id`, or `<workflow>#<index>`. */
export function cronIds(definition: WorkflowDefinition<unknown, unknown>): string[] {
  return (definition.options.cron ?? []).map((c, i) => c.id ?? `${definition.name}#${i}`);
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

/** The first tick of a cron schedule after `after` (ms). */
export function nextCronTick(workflow: string, trigger: Pick<CronTrigger, 'expression' | 'timezone'>, after: number): number {
  const next = parseCron(workflow, trigger).nextRun(new Date(after));
  if (!next) throw new ConfigurationError(`Cron expression "${trigger.expression}" of workflow "${workflow}" has no future tick.`);
  return next.getTime();
}

/** The stored JSON of a trigger of `workflow`. */
export function encodeCron(workflow: string, trigger: CronTrigger): string {
  const stored: StoredCron = { workflow, expression: trigger.expression, timezone: trigger.timezone ?? null, input: trigger.input ?? null };
  return JSON.stringify(stored);
}

/** A stored trigger read back (throws `SyntaxError` for text that is not JSON). */
export function decodeCron(json: string): StoredCron {
  return JSON.parse(json) as StoredCron;
}
