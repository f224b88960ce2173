import { ConfigurationError, NonRetriableError, TimeoutError, WorkflowRunError, type RedflowLogger, type WorkflowContext } from '../../lib';
import { TestEngine } from '../support/engine';

/**
 * `step.run({ sandbox: true }, fn)`: the function runs in a worker thread, so a step that keeps the
 * CPU busy for seconds leaves the worker's event loop free: its lease is renewed (no recovery, no
 * blocked-loop warning) and other runs go on meanwhile. Errors and aborts cross the thread boundary.
 */
describe('sandboxed steps', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('spins the CPU for 5 s in a thread while the lease holds and another run starts and ends', async () => {
    const warnings: string[] = [];
    const logger: RedflowLogger = { log: () => undefined, warn: (m) => warnings.push(m), error: (m) => warnings.push(m) };
    let quickEndedAt = 0;
    const spin = engine.define('spin', {}, async ({ step }: WorkflowContext) =>
      step.run({ name: 'crunch', sandbox: true }, ({ runId, step: name, attempt }) => {
        const until = Date.now() + 5_000;
        let turns = 0;
        while (Date.now() < until) turns++;
        return { runId, name, attempt, turns: turns > 0 };
      }),
    );
    const quick = engine.define('quick', {}, async () => {
      quickEndedAt = Date.now();
      return 'quick';
    });
    // Leases of 1 s: a worker whose loop were blocked for 5 s would lose the run and warn.
    await engine.worker({ logger });
    const spinning = await engine.client.start(spin, {});
    await new Promise((resolve) => setTimeout(resolve, 500)); // the sandboxed step has started
    const startedQuick = Date.now();
    await expect((await engine.client.start(quick, {})).result({ timeout: '3s' })).resolves.toBe('quick');
    expect(quickEndedAt - startedQuick).toBeLessThan(2_000);
    const spinStartedAt = (await engine.client.getRun(spinning.id))!.startedAt!;
    await expect(spinning.result({ timeout: '15s' })).resolves.toEqual({ runId: spinning.id, name: 'crunch', attempt: 1, turns: true });
    expect(quickEndedAt).toBeGreaterThan(spinStartedAt);
    const run = await engine.client.getRun(spinning.id);
    expect(run).toMatchObject({ status: 'succeeded', attempt: 1 });
    expect(await engine.redis.hget(engine.client.keys.run(spinning.id), 'recoveries')).toBeNull();
    expect(warnings).toEqual([]);
  }, 30_000);

  it('brings errors back with their name and message, aborts a step that passes its timeout, and refuses what cannot run in a thread', async () => {
    const outer = 'captured';
    const failing = engine.define('failing', { stepRetries: { maxAttempts: 1 } }, async ({ step }: WorkflowContext) =>
      step.run({ name: 'fail', sandbox: true }, () => {
        throw Object.assign(new Error('bad input 42'), { name: 'NonRetriableError' });
      }),
    );
    const capturing = engine.define('capturing', { stepRetries: { maxAttempts: 1 } }, async ({ step }: WorkflowContext) =>
      step.run({ name: 'capture', sandbox: true }, () => outer.length),
    );
    const forever = engine.define('forever', { stepRetries: { maxAttempts: 1 } }, async ({ step }: WorkflowContext) =>
      step.run({ name: 'loop', sandbox: true, timeout: 300 }, () => {
        for (;;) {
          // never returns: only terminating the thread ends it
        }
      }),
    );
    const after = engine.define('after', {}, async ({ step }: WorkflowContext) =>
      step.run({ name: 'hash', sandbox: true }, ({ require }) => {
        const { createHash } = require('node:crypto') as typeof import('node:crypto');
        return createHash('sha256').update('redflow').digest('hex').slice(0, 8);
      }),
    );
    const bound = engine.define('bound', { stepRetries: { maxAttempts: 1 } }, async ({ step }: WorkflowContext) =>
      step.run({ name: 'bound', sandbox: true }, (() => 1).bind(null)),
    );
    await engine.worker();

    const failed = await (await engine.client.start(failing, {})).result({ timeout: '5s' }).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(NonRetriableError);
    expect((failed as Error).message).toBe('bad input 42');
    const captured = await (await engine.client.start(capturing, {})).result({ timeout: '5s' }).catch((e: unknown) => e);
    expect(captured).toBeInstanceOf(WorkflowRunError);
    expect(captured).toMatchObject({ originalName: 'ReferenceError', message: 'outer is not defined' });
    const timedOut = await (await engine.client.start(forever, {})).result({ timeout: '5s' }).catch((e: unknown) => e);
    expect(timedOut).toBeInstanceOf(TimeoutError);
    // The terminated thread is replaced: the next sandboxed step runs.
    await expect((await engine.client.start(after, {})).result({ timeout: '5s' })).resolves.toMatch(/^[0-9a-f]{8}$/);
    const refused = await (await engine.client.start(bound, {})).result({ timeout: '5s' }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ConfigurationError);
    expect((refused as Error).message).toContain('cannot run in the sandbox: it is a bound, native or class function');
  });
});
