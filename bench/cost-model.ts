/**
 * The cost model of a run: what Redis and Node spend on it, read from Redis itself.
 *
 *   - Redis CPU µs per run: the `used_cpu_user` + `used_cpu_sys` delta of `INFO cpu` over a phase, per run.
 *   - commands per run: the `INFO commandstats` delta over a phase, per run. Redis counts the commands a
 *     script runs (`redis.call`) as well as the script call itself, so both are in the total; the
 *     breakdown lists each command's count per run.
 *   - Node CPU µs per run: `process.cpuUsage()` of this process over the phase (producer and worker
 *     share it), per run.
 *
 * Used by `npm run bench` (one column per system) and `npm run bench:cost` (the breakdown alone).
 */
import type { Redis } from 'ioredis';

export interface RedisSnapshot {
  cpuUs: number;
  commands: Map<string, number>;
  /** Per command name, µs spent (for a script call: the whole call, its inner commands included). */
  usec: Map<string, number>;
  node: NodeJS.CpuUsage;
}

/** The counters a phase's cost is the delta of. */
export async function snapshot(redis: Redis): Promise<RedisSnapshot> {
  const [cpu, stats] = await Promise.all([redis.info('cpu'), redis.info('commandstats')]);
  const field = (name: string) => Number(new RegExp(`^${name}:([\\d.]+)`, 'm').exec(cpu)?.[1] ?? NaN);
  const commands = new Map<string, number>();
  const usec = new Map<string, number>();
  for (const match of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    commands.set(match[1], Number(match[2]));
    usec.set(match[1], Number(match[3]));
  }
  return { cpuUs: (field('used_cpu_user') + field('used_cpu_sys')) * 1e6, commands, usec, node: process.cpuUsage() };
}

export interface PhaseCost {
  /** Redis CPU µs per run. */
  redisUs: number;
  /** Commands per run, script calls and the commands inside them included. */
  commands: number;
  /** Node CPU µs per run (this process). */
  nodeUs: number;
  /** Per command name, calls per run, most frequent first. */
  breakdown: [string, number][];
  /** Per command name, µs per run as Redis times it (a script call's includes its inner commands). */
  usec: [string, number][];
}

/** The cost per run of what happened between `before` and `after` (commands of `ignore` left out: the probe's own INFO). */
export function costBetween(before: RedisSnapshot, after: RedisSnapshot, runs: number, ignore = ['info', 'config|resetstat', 'config']): PhaseCost {
  const breakdown: [string, number][] = [];
  let commands = 0;
  for (const [name, calls] of after.commands) {
    if (ignore.includes(name)) continue;
    const delta = calls - (before.commands.get(name) ?? 0);
    if (delta <= 0) continue;
    commands += delta;
    breakdown.push([name, delta / runs]);
  }
  breakdown.sort((a, b) => b[1] - a[1]);
  const usec: [string, number][] = [];
  for (const [name, us] of after.usec) {
    const delta = us - (before.usec.get(name) ?? 0);
    if (!ignore.includes(name) && delta > 0) usec.push([name, delta / runs]);
  }
  usec.sort((a, b) => b[1] - a[1]);
  const nodeUs = after.node.user + after.node.system - (before.node.user + before.node.system);
  return { redisUs: (after.cpuUs - before.cpuUs) / runs, commands: commands / runs, nodeUs: nodeUs / runs, breakdown, usec };
}

/** "12 zrem, 5 zadd, ..." with counts per run rounded to 2 decimals (entries under 0.005 per run left out). */
export function formatBreakdown(cost: PhaseCost, limit = 30): string {
  return cost.breakdown
    .filter(([, n]) => n >= 0.005)
    .slice(0, limit)
    .map(([name, n]) => `${Number(n.toFixed(2))} ${name}`)
    .join(', ');
}

/** "evalsha 40.1, zadd 3.2, ..." µs per run (entries under 0.05 µs left out). */
export function formatUsec(cost: PhaseCost, limit = 30): string {
  return cost.usec
    .filter(([, n]) => n >= 0.05)
    .slice(0, limit)
    .map(([name, n]) => `${name} ${n.toFixed(1)}`)
    .join(', ');
}
