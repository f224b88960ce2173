/** What bench/chaos/chaos.ts and its worker processes (chaos-worker.ts) agree on. */

/** The workflow the workers serve. */
export const CHAOS_WORKFLOW = 'chaos';

/** Its steps, run in this order. */
export const STEPS = ['a', 'b', 'c'] as const;

export interface ChaosInput {
  n: number;
}

/**
 * CHAOS_QUEUE: how runs queue. 'plain' (default); 'keyed': under a concurrency key (10 keys, 2 runs
 * of each at once, so keys wait at their limit); 'priority': each run with priority n % 3.
 */
export const CHAOS_QUEUE = process.env.CHAOS_QUEUE ?? 'plain';
if (!['plain', 'keyed', 'priority'].includes(CHAOS_QUEUE)) throw new Error(`CHAOS_QUEUE must be plain, keyed or priority, got "${CHAOS_QUEUE}".`);

/** The workflow's options for CHAOS_QUEUE, the same in the driver and in the workers. */
export function chaosWorkflowOptions(maxAttempts: number) {
  const keyed = CHAOS_QUEUE === 'keyed' ? { concurrency: { key: (input: ChaosInput) => `k${input.n % 10}`, limit: 2 } } : {};
  return { maxAttempts, maxConcurrency: Infinity, ...keyed };
}

/** The start options of run n for CHAOS_QUEUE. */
export function chaosRunOptions(n: number) {
  return { idempotencyKey: `chaos-${n}`, ...(CHAOS_QUEUE === 'priority' && { priority: n % 3 }) };
}

/** Short timings (as FAST_RUNTIME in test/support/engine.ts) so recovery happens within seconds. */
export const FAST_RUNTIME = { leaseDuration: 1_000, heartbeatInterval: 250, reaperInterval: 100, blockTimeout: 100 };

/** What step `name` of the run with input n returns. */
export function stepValue(n: number, name: (typeof STEPS)[number]): number {
  return (STEPS.indexOf(name) + 1) * n + 1;
}

/** The output a run with input n must end with: the sum of its step values. */
export function expectedOutput(n: number): number {
  return STEPS.reduce((sum, name) => sum + stepValue(n, name), 0);
}

/** Hash of every step-body execution: field `<runId>|<step>|<execution id>`, value `<stored>|<startedAt>`. */
export function execsKey(prefix: string): string {
  return `{${prefix}}:chaos:execs`;
}
