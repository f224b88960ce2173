import type { WorkflowClient } from '../client/workflow-client';
import { decodeCron, nextCronTick, scheduleOf } from '../definition/cron';

/** Cron ticks fired per call at most. */
const CRON_BATCH = 20;

/**
 * Fires the cron ticks that are due, of workflow definitions' triggers and of runtime schedules
 * alike: where a cron tick fires. Every worker calls it in a loop;
 * `cron-fire-1.lua` moves a trigger's next tick and starts its run in one call, so each tick
 * fires exactly once across workers. A tick missed while no worker ran is fired once, and the
 * schedule resumes after now. Returns the delay until the next check: the next tick, at most a
 * second away.
 */
export async function fireDueCrons(client: WorkflowClient, report: (error: unknown, message: string) => void): Promise<number> {
  const { keys, redis, scripts } = client;
  const now = client.clock.now();
  const due = await redis.zrangebyscore(keys.cronNext(), '-inf', now, 'WITHSCORES', 'LIMIT', 0, CRON_BATCH);
  if (due.length) {
    const ids = due.filter((_, i) => i % 2 === 0);
    const defs = await redis.hmget(keys.cronDefs(), ...ids);
    for (let i = 0; i < ids.length; i++) {
      const tick = Number(due[2 * i + 1]);
      try {
        if (defs[i] === null) continue;
        const def = decodeCron(defs[i]!);
        const next = nextCronTick(def.workflow, scheduleOf(def), Math.max(tick, now));
        await scripts.cronFire(ids[i], tick, next, def.workflow, JSON.stringify(def.input ?? null), now);
      } catch (error) {
        report(error, `Cron "${ids[i]}" could not fire: ${(error as Error).message}`);
      }
    }
  }
  const [, nextTick] = await redis.zrange(keys.cronNext(), 0, '0', 'WITHSCORES');
  const wait = nextTick === undefined ? 1_000 : Number(nextTick) - client.clock.now();
  return Math.min(1_000, Math.max(5, wait));
}
