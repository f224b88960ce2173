import { createRequire } from 'node:module';
import type { Logger } from '@nestjs/common';
import type { DiscoveryService } from '@nestjs/core';

import { ConfigurationError, type WorkflowRegistry } from '../core';
import { cronIds } from '../core/definition/cron';

/**
 * Interop with `@nestjs/schedule` (an optional peer): its decorators on a `@Workflow` method are
 * refused at startup, and this app's distributed crons are listed in its `SchedulerRegistry`.
 * Nothing here imports `@nestjs/schedule`: its metadata keys are plain strings, and its registry is
 * found among the app's providers.
 */

/** The metadata keys and scheduler types `@nestjs/schedule` sets on a decorated method. */
const SCHEDULER_TYPE = 'SCHEDULER_TYPE';
const SCHEDULE_CRON_OPTIONS = 'SCHEDULE_CRON_OPTIONS';
const SCHEDULER_DECORATORS: Readonly<Record<number, string>> = { 1: 'Cron', 2: 'Timeout', 3: 'Interval' };

/** The prefix of the names under which this app's crons are listed in `SchedulerRegistry`. */
export const SCHEDULER_REGISTRY_PREFIX = 'redflow:';

/**
 * Throws when `@Cron`, `@Interval` or `@Timeout` of `@nestjs/schedule` decorates the `@Workflow`
 * method `where`: they would call it in every replica, without a workflow context.
 */
export function assertNoScheduleDecorator(handler: object, where: string): void {
  const type = Reflect.getMetadata(SCHEDULER_TYPE, handler) as number | undefined;
  if (type === undefined) return;
  const decorator = SCHEDULER_DECORATORS[type] ?? 'a scheduler decorator';
  const cron = Reflect.getMetadata(SCHEDULE_CRON_OPTIONS, handler) as { cronTime?: unknown } | undefined;
  const expression = typeof cron?.cronTime === 'string' ? JSON.stringify(cron.cronTime) : "'0 2 * * *'";
  throw new ConfigurationError(
    `${where} is a @Workflow with @${decorator} from @nestjs/schedule. That scheduler calls the method in every replica of the app, on its own timer and without a workflow context, so each tick would run it once per replica and fail. ` +
      (type === 1
        ? `Use the distributed @Cron of nestjs-redflow instead, which starts one run per tick across all replicas: import { Cron } from 'nestjs-redflow' and write @Cron(${expression}, { id: '${where}' }).`
        : `Remove @${decorator}, and start the workflow from a @Cron of nestjs-redflow (import { Cron } from 'nestjs-redflow'), which starts one run per tick across all replicas, or from a plain method that calls RedflowClient.run.`),
  );
}

/** The part of `SchedulerRegistry` used here. */
interface SchedulerRegistryLike {
  addCronJob(name: string, job: unknown): void;
  doesExist(type: 'cron', name: string): boolean;
}

/** `cron`'s CronJob, loaded from where `@nestjs/schedule` is installed (it depends on it). */
type CronJobClass = { from(params: { cronTime: string; onTick: () => void; start: boolean; timeZone?: string }): unknown };

function isSchedulerRegistry(value: unknown): value is SchedulerRegistryLike {
  const candidate = value as Partial<SchedulerRegistryLike> & { constructor?: { name?: string } };
  return typeof value === 'object' && value !== null && candidate.constructor?.name === 'SchedulerRegistry' && typeof candidate.addCronJob === 'function';
}

function loadCronJob(): CronJobClass | undefined {
  try {
    const fromSchedule = createRequire(require.resolve('@nestjs/schedule'));
    return (fromSchedule('cron') as { CronJob: CronJobClass }).CronJob;
  } catch {
    return undefined;
  }
}

/**
 * When the app imports `ScheduleModule`, adds each cron trigger of `registry` to its
 * `SchedulerRegistry` as a job named "redflow:<cron id>" that is never started: tools that list the
 * app's cron jobs see the expression and the next date, and nothing fires twice (the ticks are
 * this library's, once per tick across replicas). Returns the names added.
 */
export function listCronsInSchedulerRegistry(discovery: DiscoveryService, registry: WorkflowRegistry, logger: Logger): string[] {
  const schedulerRegistry = discovery
    .getProviders()
    .map((wrapper) => wrapper.instance as unknown)
    .find(isSchedulerRegistry);
  if (!schedulerRegistry) return [];
  const CronJob = loadCronJob();
  if (!CronJob) return [];
  const added: string[] = [];
  for (const definition of registry.list()) {
    const triggers = definition.options.cron ?? [];
    cronIds(definition).forEach((id, i) => {
      const name = `${SCHEDULER_REGISTRY_PREFIX}${id}`;
      const { expression, timezone } = triggers[i];
      // An rrule has no cron form: such a trigger is not listed in SchedulerRegistry.
      if (expression === undefined || schedulerRegistry.doesExist('cron', name)) return;
      try {
        schedulerRegistry.addCronJob(name, CronJob.from({ cronTime: expression, onTick: () => undefined, start: false, timeZone: timezone }));
        added.push(name);
      } catch (error) {
        // An expression that croner takes but `cron` does not: the trigger works, it is just not listed.
        logger.debug?.(`Cron "${id}" is not listed in SchedulerRegistry: ${(error as Error).message}`);
      }
    });
  }
  return added;
}
