import type { RedflowLogger } from '../../lib/core';
import { eventually, TestEngine } from '../support/engine';

/** One error line per run that ends failed or compensation_failed: the workflow, the run id, the error. */
describe('failed runs are logged', () => {
  let engine: TestEngine;
  let errors: string[];
  const logger: RedflowLogger = { log: () => undefined, warn: () => undefined, error: (message) => errors.push(message) };
  beforeEach(() => {
    engine = new TestEngine();
    errors = [];
  });
  afterEach(() => engine.close());

  it('logs a run that failed for good once, and neither a retried attempt nor a run that then succeeded', async () => {
    let calls = 0;
    const flaky = engine.registry.define('flaky', { retries: { maxAttempts: 2, delay: 10 }, stepRetries: { maxAttempts: 1 } }, async ({ step }) =>
      step.run('call', () => {
        if (++calls === 1) throw new Error('first call fails');
        return 'ok';
      }),
    );
    const broken = engine.registry.define('broken', { retries: { maxAttempts: 2, delay: 10 }, stepRetries: { maxAttempts: 1 } }, async ({ step }) =>
      step.run('call', () => {
        throw new TypeError('cannot read the order');
      }),
    );
    await engine.worker({ logger, logFailedRuns: true });
    const ok = await engine.client.start(flaky, {});
    await expect(ok.result({ timeoutMs: 5_000 })).resolves.toBe('ok');
    const bad = await engine.client.start(broken, {});
    await expect(bad.result({ timeoutMs: 5_000 })).rejects.toThrow('cannot read the order');
    await eventually(() => errors.length > 0);
    expect(errors).toEqual([`Run "${bad.id}" of workflow "broken" failed after attempt 2: TypeError: cannot read the order`]);
  });

  it('logs a compensation_failed run as needing a person, with both errors', async () => {
    const saga = engine.registry.define('saga', { stepRetries: { maxAttempts: 1 } }, async ({ step }) => {
      await step.run(
        {
          name: 'reserve',
          compensate: () => {
            throw new Error('the stock service is down');
          },
          compensateRetries: { maxAttempts: 1 },
        },
        () => 'reserved',
      );
      await step.run('charge', () => {
        throw new Error('card declined');
      });
    });
    await engine.worker({ logger, logFailedRuns: true });
    const run = await engine.client.start(saga, {});
    await eventually(async () => (await engine.client.getRun(run.id))?.status === 'compensation_failed');
    await eventually(() => errors.length > 0);
    expect(errors).toEqual([
      `Run "${run.id}" of workflow "saga" is compensation_failed and needs a person: a compensation failed after its retries with Error: the stock service is down (the run failed with Error: card declined). Fix the cause, then resume it (client.resume or the dashboard) to run the compensations left.`,
    ]);
  });

  it('logs nothing for a canceled run, nor with logFailedRuns: false', async () => {
    const stuck = engine.registry.define('stuck', {}, async ({ step }) => step.waitForSignal('wait', 'never'));
    const broken = engine.registry.define('broken-quietly', { stepRetries: { maxAttempts: 1 } }, async ({ step }) =>
      step.run('call', () => {
        throw new Error('nope');
      }),
    );
    const logging = await engine.worker({ logger, logFailedRuns: true });
    const canceled = await engine.client.start(stuck, {});
    await eventually(async () => (await engine.client.getRun(canceled.id))?.waitingFor);
    await engine.client.cancelRun(canceled.id);
    await eventually(async () => (await engine.client.getRun(canceled.id))?.status === 'canceled');
    await logging.stop();
    expect(errors).toEqual([]);

    await engine.worker({ logger, logFailedRuns: false });
    const failed = await engine.client.start(broken, {});
    await expect(failed.result({ timeoutMs: 5_000 })).rejects.toThrow('nope');
    expect(errors).toEqual([]);
  });
});
