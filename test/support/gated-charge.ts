import { WorkflowRegistry } from '../../lib';
import { deferred } from './engine';

/**
 * The three-step workflow "charge" of the full-Redis and refused-write tests: steps a and c return
 * at once, step b waits on `gate`. `executions` counts each step body per run ("<runId>:<step>"),
 * and `gated()` how many b bodies are waiting on the gate.
 */
export function gatedChargeWorkflow() {
  const registry = new WorkflowRegistry();
  const executions = new Map<string, number>();
  const ran = (runId: string, step: string) => executions.set(`${runId}:${step}`, (executions.get(`${runId}:${step}`) ?? 0) + 1);
  const gate = deferred();
  let inGate = 0;
  const wf = registry.define('charge', { maxConcurrency: Infinity }, async ({ run, step }) => {
    const a = await step.run('a', () => {
      ran(run.id, 'a');
      return 1;
    });
    const b = await step.run('b', async () => {
      ran(run.id, 'b');
      inGate++;
      await gate.promise;
      return 2;
    });
    const c = await step.run('c', () => {
      ran(run.id, 'c');
      return 3;
    });
    return a + b + c;
  });
  return { registry, wf, executions, gate, gated: () => inGate };
}
