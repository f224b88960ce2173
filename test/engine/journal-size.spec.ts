import type { JournalLargeEvent, RedflowLogger } from '../../lib/core';
import { TestEngine } from '../support/engine';

/**
 * A run whose journal (step records and values) passes the worker's `journalWarningBytes` is told
 * once: one warning naming the run and the fix, and the `onJournalLarge` hook; later attempts of
 * the same run, on any worker, read the marker the first one stored and stay quiet.
 */
describe('journal size warning', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('warns once per run when its journal passes journalWarningBytes, across attempts', async () => {
    const warnings: string[] = [];
    const events: JournalLargeEvent[] = [];
    const logger: RedflowLogger = { log: () => undefined, warn: (m) => warnings.push(m), error: () => undefined };
    let attempts = 0;
    const big = engine.registry.define('big', { retries: { maxAttempts: 2, delay: 10 }, stepRetries: { maxAttempts: 1 } }, async ({ step }) => {
      attempts++;
      for (let i = 0; i < 5; i++) await step.run(`page-${i}`, () => 'x'.repeat(600));
      // The first attempt fails after its five steps: the second replays them and adds one more.
      await step.run('last', () => {
        if (attempts === 1) throw new Error('once');
        return 'x'.repeat(600);
      });
      return 'done';
    });
    const small = engine.registry.define('small', {}, async ({ step }) => step.run('one', () => 'tiny'));
    await engine.worker({ logger, journalWarningBytes: 2_000, hooks: { onJournalLarge: (e) => void events.push(e) } });
    const run = await engine.client.start(big, {});
    await expect(run.result({ timeout: '5s' })).resolves.toBe('done');
    await expect((await engine.client.start(small, {})).result({ timeout: '5s' })).resolves.toBe('tiny');

    expect(attempts).toBe(2);
    expect(events).toEqual([{ runId: run.id, workflow: 'big', attempt: 1, bytes: expect.any(Number), limit: 2_000 }]);
    expect(events[0].bytes).toBeGreaterThan(2_000);
    expect(events[0].bytes).toBeLessThan(3_000);
    expect(warnings).toEqual([
      expect.stringContaining(
        `Run "${run.id}" of workflow "big" stores ${events[0].bytes} bytes of step records and values, more than journalWarningBytes (2000)`,
      ),
    ]);
    expect(await engine.redis.hget(engine.client.keys.run(run.id), 'journalLarge')).toBe(String(events[0].bytes));
  });

  it('is off with Infinity, and refuses a size that is not a whole number', async () => {
    const warnings: string[] = [];
    const logger: RedflowLogger = { log: () => undefined, warn: (m) => warnings.push(m), error: () => undefined };
    const big = engine.registry.define('big', {}, async ({ step }) => step.run('page', () => 'x'.repeat(5_000)));
    await expect(engine.worker({ journalWarningBytes: 1.5 })).rejects.toThrow('startWorker journalWarningBytes must be an integer');
    await engine.worker({ logger, journalWarningBytes: Infinity });
    await (await engine.client.start(big, {})).result({ timeout: '5s' });
    expect(warnings).toEqual([]);
  });
});
