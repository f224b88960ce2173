import { NonRetriableError, type StepState } from '../../lib/core';
import { TestEngine } from '../support/engine';

/**
 * Steps retry by default, as activities and steps do in Temporal, Inngest and the official Nest
 * page: 3 tries per run attempt, 1 s then 2 s apart (workflow time, so the engine's clock skips
 * the waits). A workflow's `stepRetries`, a step's `retries` and the worker's `defaultStepRetries`
 * change it; `{ maxAttempts: 1 }` turns it off.
 */
describe('step retries by default', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const stepOf = async (runId: string, name: string): Promise<StepState> => (await engine.client.getRunSteps(runId)).find((s) => s.name === name)!;

  it('tries a step 3 times, 1 s then 2 s apart, before the run fails', async () => {
    // Workflow time of each try: the retry delays are counted on the engine's clock.
    const at: number[] = [];
    const wf = engine.define('charge', {}, async ({ step }) =>
      step.run('charge', () => {
        at.push(engine.clock.now());
        throw new Error(`card network down (${at.length})`);
      }),
    );
    // The retry is due `delay` after the try failed (a few ms after it began here; never the next delay).
    const dueAfter = async (runId: string, delay: number) => {
      const { retryAt } = await stepOf(runId, 'charge');
      expect(retryAt! - at[at.length - 1]).toBeGreaterThanOrEqual(delay);
      expect(retryAt! - at[at.length - 1]).toBeLessThan(delay + 500);
    };
    const first = await engine.run(wf, {});
    expect(first.status).toBe('waiting');
    expect(at).toHaveLength(1);
    await dueAfter(first.runId, 1_000);

    await engine.clock.advance('1s');
    const second = await engine.runUntilWaiting(first.runId);
    expect(second.status).toBe('waiting');
    expect(at).toHaveLength(2);
    await dueAfter(first.runId, 2_000);

    await engine.clock.advance('2s');
    const ended = await engine.runUntilWaiting(first.runId);
    expect(at).toHaveLength(3);
    expect(ended.status).toBe('failed');
    expect(ended.error).toMatchObject({ message: 'card network down (3)' });
    expect(ended.state.attempt).toBe(1);
    expect((await stepOf(first.runId, 'charge')).attempts).toBe(3);
  });

  it('a step that fails once succeeds on its second try, in the same run attempt', async () => {
    let tries = 0;
    const wf = engine.define('flaky', {}, async ({ step }) =>
      step.run('call', () => {
        if (++tries === 1) throw new Error('timeout');
        return 'ok';
      }),
    );
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    await engine.clock.advance('1s');
    const ended = await engine.runUntilWaiting(waiting.runId);
    expect(ended).toMatchObject({ status: 'succeeded', output: 'ok' });
    expect(ended.state.attempt).toBe(1);
    expect(tries).toBe(2);
  });

  it('NonRetriableError skips the default retries', async () => {
    let tries = 0;
    const wf = engine.define('refuse', {}, async ({ step }) =>
      step.run('validate', () => {
        tries++;
        throw new NonRetriableError('the card number is invalid');
      }),
    );
    const ended = await engine.run(wf, {});
    expect(ended.status).toBe('failed');
    expect(tries).toBe(1);
  });

  it("a workflow's stepRetries and a step's retries replace the default; { maxAttempts: 1 } turns it off", async () => {
    const tries = { once: 0, twice: 0, own: 0 };
    const off = engine.define('off', { stepRetries: { maxAttempts: 1 } }, async ({ step }) =>
      step.run('once', () => {
        tries.once++;
        throw new Error('down');
      }),
    );
    const two = engine.define('two', { stepRetries: { maxAttempts: 2, delay: '10s' } }, async ({ step }) => {
      await step.run({ name: 'own', retries: { maxAttempts: 1 } }, () => {
        if (++tries.own === 1) return 'stored';
        throw new Error('never again');
      });
      return step.run('twice', () => {
        tries.twice++;
        throw new Error('down');
      });
    });
    expect(await engine.run(off, {})).toMatchObject({ status: 'failed' });
    expect(tries.once).toBe(1);

    const waiting = await engine.run(two, {});
    expect(waiting.status).toBe('waiting');
    // Not due after the default's 1 s: the workflow's 10 s delay applies.
    await engine.clock.advance('1s');
    expect((await engine.runUntilWaiting(waiting.runId)).status).toBe('waiting');
    expect(tries.twice).toBe(1);
    await engine.clock.advance('9s');
    expect(await engine.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'failed' });
    expect(tries).toEqual({ once: 1, twice: 2, own: 1 });
  });

  it("the worker's defaultStepRetries applies to workflows that set no stepRetries", async () => {
    let tries = 0;
    const wf = engine.define('quiet', {}, async ({ step }) =>
      step.run('call', () => {
        tries++;
        throw new Error('down');
      }),
    );
    await engine.worker({ defaultStepRetries: { maxAttempts: 1 } });
    const handle = await engine.client.start(wf, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('down');
    expect(tries).toBe(1);
  });

  it('refuses a bad stepRetries when the workflow is defined, naming it', () => {
    expect(() => engine.define('bad', { stepRetries: { maxAttempts: 0 } }, async () => undefined)).toThrow(/stepRetries of workflow "bad" maxAttempts/);
    expect(() => engine.define('bad-key', { stepRetries: { tries: 3 } as never }, async () => undefined)).toThrow(/Unknown option "tries"/);
  });
});
