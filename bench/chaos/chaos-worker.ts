/**
 * A worker process of the chaos test (bench/chaos/chaos.ts starts 3 of them and SIGKILLs and
 * replaces them at random):
 *
 *   CHAOS_REDIS_URL=redis://127.0.0.1:<port> CHAOS_PREFIX=<prefix> node -r @swc-node/register bench/chaos/chaos-worker.ts
 *
 * It serves the workflow `chaos`: three steps a, b, c in sequence; the output is a + b + c. Every
 * step body, as its first action, records that it runs (see `recordExecution`). On SIGUSR2 it
 * busy-waits `CHAOS_BLOCK_MS` so its event loop is blocked for longer than the lease. It writes
 * "ready" to stdout once the worker serves, and the engine's log lines to stderr.
 */
import { Redis } from 'ioredis';

import { createClient, startWorker, WorkflowRegistry, type WorkflowContext } from '../../lib';
import { CHAOS_WORKFLOW, chaosWorkflowOptions, execsKey, FAST_RUNTIME, STEPS, stepValue, type ChaosInput } from './chaos-shared';

// Installed first: SIGUSR2's default action would end the process.
const blockMs = Number(process.env.CHAOS_BLOCK_MS ?? 1_500);
process.on('SIGUSR2', () => {
  const end = Date.now() + blockMs;
  while (Date.now() < end) {
    // Blocks the event loop: no heartbeat, no Redis reply is read, no timer fires.
  }
});

// The parent holds our stdin open: when it goes away (even SIGKILLed), so do we.
process.stdin
  .on('end', () => process.exit(0))
  .on('error', () => process.exit(0))
  .resume();

const url = process.env.CHAOS_REDIS_URL;
const prefix = process.env.CHAOS_PREFIX;
const concurrency = Number(process.env.CHAOS_CONCURRENCY ?? 8);
const stepMaxMs = Number(process.env.CHAOS_STEP_MS ?? 100);
const maxAttempts = Number(process.env.CHAOS_MAX_ATTEMPTS ?? 1);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  if (!url || !prefix) throw new Error('chaos-worker needs CHAOS_REDIS_URL and CHAOS_PREFIX.');
  // The recorder's own connection: commands wait (and are resent) across Redis restarts.
  const recorder = new Redis(url, { maxRetriesPerRequest: null });
  recorder.on('error', () => undefined);
  const registry = new WorkflowRegistry();
  const client = createClient({ url, prefix, registry });
  let executions = 0;

  /**
   * Records one execution of a step body, before the body does anything else. First an HGET of the
   * step's record in the run hash (a read: Redis answers it even when full), sent as the body
   * starts; then HSET {prefix}:chaos:execs "<runId>|<step>|<pid>.<n>"
   * "<stored>|<startedAt>|<attempt>|<record attempt>|<record finishedAt>|<read at>", where <stored>
   * is 1 when the run hash already held a succeeded record of this step (a completed step running
   * again), else 0. The field is unique per execution, so a command that ioredis resends after a
   * reconnect cannot count twice. A refused or failed write (Redis full or restarting) is retried
   * until it is stored: the body does not go on before.
   */
  async function recordExecution(runId: string, attempt: number, step: string): Promise<void> {
    const startedAt = Date.now();
    const field = `${runId}|${step}|${process.pid}.${++executions}`;
    let value: string | undefined;
    for (let pause = 20; ; pause = Math.min(pause * 2, 500)) {
      try {
        if (value === undefined) {
          const text = await recorder.hget(client.keys.run(runId), `s:${step}`);
          const record = text === null ? undefined : (JSON.parse(text) as unknown[]);
          const stored = record?.[0] === 1;
          value = [stored ? 1 : 0, startedAt, attempt, stored ? record[2] : '', stored ? record[3] : '', Date.now()].join('|');
        }
        await recorder.hset(execsKey(prefix!), field, value);
        return;
      } catch {
        await sleep(pause);
      }
    }
  }

  registry.define(CHAOS_WORKFLOW, chaosWorkflowOptions(maxAttempts), async ({ input, run, step }: WorkflowContext<ChaosInput>) => {
    let sum = 0;
    for (const name of STEPS) {
      sum += await step.run(name, async () => {
        await recordExecution(run.id, run.attempt, name);
        await sleep(Math.floor(Math.random() * (stepMaxMs + 1)));
        return stepValue(input.n, name);
      });
    }
    return sum;
  });

  await startWorker({ app: 'chaos', client, registry, concurrency, runtime: FAST_RUNTIME });
  process.stdout.write('ready\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`chaos-worker failed to start: ${(error as Error)?.stack ?? String(error)}\n`);
  process.exit(1);
});
