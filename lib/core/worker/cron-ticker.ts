import { cronTickInput } from '../client/schedules';
import type { WorkflowClient } from '../client/workflow-client';
import { decodeCron, planTick } from '../definition/cron';
import type { WorkflowRegistry } from '../definition/workflow';
import { ConfigurationError } from '../errors';

/** Cron ticks fired per call at most. */
const CRON_BATCH = 20;

/** Crons this process already said it cannot fire (an input function it does not have). */
const reportedMissing = new WeakMap<WorkflowRegistry, Set<string>>();

/**
 * Fires the cron ticks that are due, of workflow definitions' triggers and of runtime schedules
 * alike: where a cron tick fires. Every worker calls it in a loop; `cron-fire-1.lua` moves a
 * trigger's next tick and starts its run in one call, so each tick fires exactly once across
 * workers. The schedule's `missed` policy decides here what a late tick does (`planTick`), its
 * `overlap` policy in the script. Returns the delay until the next check: the next tick, at most
 * a second away (a second when a due tick was left to a worker with its input function).
 */
export async function fireDueCrons(client: WorkflowClient, registry: WorkflowRegistry, report: (error: unknown, message: string) => void): Promise<number> {
  const { scripts } = client;
  const queries = client.context.registryQueries;
  const now = client.clock.now();
  let leftToOthers = false;
  for (const { cronId, tick, def: stored } of await queries.dueCrons(now, CRON_BATCH)) {
    try {
      if (stored === null) continue;
      const def = decodeCron(stored);
      const { fire, next } = planTick(def, tick, now);
      let input: string | undefined = 'null';
      try {
        if (fire) input = cronTickInput(client, registry, cronId, def, tick);
      } catch (error) {
        // An input function that throws, or returns what no run can take: the tick is dropped, loudly.
        report(error, `Cron "${cronId}" dropped its tick at ${new Date(tick).toISOString()}: its input function failed: ${(error as Error).message}`);
        await scripts.cronFire({
          cronId,
          tick,
          next,
          workflow: def.workflow,
          input: 'null',
          now,
          overlap: 'allow',
          mode: 'drop',
          limit: def.limit,
          priority: undefined,
        });
        continue;
      }
      if (input === undefined) {
        leftToOthers = true;
        reportOnce(registry, cronId, () => {
          const message = `Cron "${cronId}" of workflow "${def.workflow}" computes its input with a function, which this worker cannot call (it does not define "${def.workflow}"): a worker of the app that defines it fires the tick. Give this worker the workflow, or a static input.`;
          report(new ConfigurationError(message), message);
        });
        continue;
      }
      const mode = fire ? 'tick' : 'drop';
      await scripts.cronFire({
        cronId,
        tick,
        next,
        workflow: def.workflow,
        input,
        now,
        overlap: def.overlap ?? 'skip',
        mode,
        limit: def.limit,
        priority: def.priority,
      });
    } catch (error) {
      report(error, `Cron "${cronId}" could not fire: ${(error as Error).message}`);
    }
  }
  if (leftToOthers) return 1_000;
  const nextTick = await queries.nextCronTick();
  const wait = nextTick === undefined ? 1_000 : nextTick - client.clock.now();
  return Math.min(1_000, Math.max(5, wait));
}

function reportOnce(registry: WorkflowRegistry, cronId: string, say: () => void): void {
  let reported = reportedMissing.get(registry);
  if (!reported) reportedMissing.set(registry, (reported = new Set()));
  if (reported.has(cronId)) return;
  reported.add(cronId);
  say();
}
