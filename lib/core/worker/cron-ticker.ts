import type { WorkflowClient } from '../client/workflow-client';
import { decodeCron, planTick } from '../definition/cron';

/** Cron ticks fired per call at most. */
const CRON_BATCH = 20;

/**
 * Fires the cron ticks that are due, of workflow definitions' triggers and of runtime schedules
 * alike: where a cron tick fires. Every worker calls it in a loop; `cron-fire-1.lua` moves a
 * trigger's next tick and starts its run in one call, so each tick fires exactly once across
 * workers. The schedule's `missed` policy decides here what a late tick does (`planTick`), its
 * `overlap` policy in the script. Returns the delay until the next check: the next tick, at most
 * a second away.
 */
export async function fireDueCrons(client: WorkflowClient, report: (error: unknown, message: string) => void): Promise<number> {
  const { scripts } = client;
  const queries = client.context.registryQueries;
  const now = client.clock.now();
  for (const { cronId, tick, def: stored } of await queries.dueCrons(now, CRON_BATCH)) {
    try {
      if (stored === null) continue;
      const def = decodeCron(stored);
      const { fire, next } = planTick(def, tick, now);
      const input = JSON.stringify(def.input ?? null);
      await scripts.cronFire({ cronId, tick, next, workflow: def.workflow, input, now, overlap: def.overlap ?? 'skip', mode: fire ? 'tick' : 'drop' });
    } catch (error) {
      report(error, `Cron "${cronId}" could not fire: ${(error as Error).message}`);
    }
  }
  const nextTick = await queries.nextCronTick();
  const wait = nextTick === undefined ? 1_000 : nextTick - client.clock.now();
  return Math.min(1_000, Math.max(5, wait));
}
