/**
 * What each hot-path script costs Redis, alone: 20,000 calls of `enqueue`, then of `claim`, then of
 * `finish` (succeeded, one step record), sent directly through the engine's RedisScripts on a
 * private redis-server, with `INFO commandstats` read after each phase.
 *
 *   npm run bench:scripts
 *
 * Per call: the script call's µs as Redis times it (its commands included), the µs of the
 * commands it ran, and the difference: what the call itself costs (taking its arguments, the Lua
 * code between commands, each `redis.call`'s own setup, the reply). docs/performance.md reads it.
 */
import { Redis } from 'ioredis';

import { createClient, WorkflowRegistry } from '../lib';
import { envInt, redisServers, runMain } from './bench-support';

const CALLS = envInt('BENCH_CALLS', 20_000);

type Stats = Record<string, { calls: number; usec: number }>;

async function commandStats(admin: Redis): Promise<Stats> {
  const out: Stats = {};
  for (const m of (await admin.info('commandstats')).matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    if (m[1] !== 'info' && !m[1].startsWith('config')) out[m[1]] = { calls: Number(m[2]), usec: Number(m[3]) };
  }
  return out;
}

function report(script: string, stats: Stats): void {
  const call = stats.fcall ?? stats.evalsha ?? { calls: 0, usec: 0 };
  let inner = 0;
  const commands: string[] = [];
  for (const [name, { calls, usec }] of Object.entries(stats)) {
    if (name === 'fcall' || name === 'evalsha' || name === 'eval') continue;
    inner += usec;
    commands.push(`${Number((calls / CALLS).toFixed(2))} ${name}`);
  }
  const per = (us: number) => (us / CALLS).toFixed(1);
  console.log(`| ${script} | ${per(call.usec)} µs | ${per(inner)} µs | ${per(call.usec - inner)} µs | ${commands.sort().join(', ')} |`);
}

async function main(): Promise<number> {
  const servers = await redisServers.startStandalone();
  const admin = new Redis(servers.url);
  const registry = new WorkflowRegistry();
  registry.define('w', { maxConcurrency: Infinity }, () => 1);
  const client = createClient({ url: servers.url, prefix: 'script-cost', registry });
  try {
    // The first call loads the library; it is not counted.
    await client.scripts.claim('default', 'warm-up', Date.now(), 60_000);
    const now = Date.now();
    const ids = Array.from({ length: CALLS }, (_, i) => `run-${String(i).padStart(14, '0')}`);
    console.log(`${CALLS} calls of each script; µs per call as Redis times them (INFO commandstats).\n`);
    console.log('| script | call | its commands | the call itself | commands per call |');
    console.log('| --- | ---: | ---: | ---: | --- |');
    const phases: Array<[string, (id: string, i: number) => Promise<unknown>]> = [
      [
        'enqueue',
        (id, i) =>
          client.scripts.enqueue({
            runId: id,
            workflow: 'w',
            queue: 'default',
            maxAttempts: '1',
            input: `{"i":${i}}`,
            now,
            runAt: 0,
            idempotencyKey: '',
            idempotencyTtlSec: 0,
            localFlow: true,
            extra: [],
          }),
      ],
      ['claim', (_id, i) => client.scripts.claim('default', `lease-${i}`, now, 60_000)],
      [
        'finish',
        (id, i) =>
          client.scripts.finish({
            runId: id,
            queue: 'default',
            token: `lease-${i}`,
            now,
            outcome: 'succeeded',
            payload: '{"ok":true}',
            dueAt: 0,
            nextToken: '',
            leaseMs: 60_000,
            waitFields: [],
            records: ['s:work', `[1,1,1,${now},0,{"ok":true}]`],
          }),
      ],
    ];
    for (const [script, call] of phases) {
      await admin.config('RESETSTAT');
      await Promise.all(ids.map((id, i) => call(id, i)));
      report(script, await commandStats(admin));
    }
    return 0;
  } finally {
    await client.close();
    admin.disconnect();
    await redisServers.stopServers(servers);
  }
}

runMain(main);
