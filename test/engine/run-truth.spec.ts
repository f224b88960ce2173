import { eventually, TestEngine } from '../support/engine';

/**
 * What getRun, listRunSummaries and getRunSteps say about a run tells the truth: an error of an
 * earlier attempt is not a succeeded run's error, and an ended run waits for nothing.
 */
describe('run state tells the truth', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('a run that failed once and then succeeded has no error; a run that failed for good keeps its own', async () => {
    let tries = 0;
    const flaky = engine.registry.define('flaky', { retries: { maxAttempts: 2, delay: 10 }, stepRetries: { maxAttempts: 1 } }, async ({ step }) => {
      return step.run('charge', () => {
        if (++tries === 1) throw new Error('card network down');
        return 'charged';
      });
    });
    const broken = engine.registry.define('broken', { retries: { maxAttempts: 1 } }, async () => {
      throw new Error('card declined');
    });
    await engine.worker();
    const ok = await engine.client.start(flaky, {});
    await expect(ok.result({ timeoutMs: 5_000 })).resolves.toBe('charged');
    const bad = await engine.client.start(broken, {});
    await expect(bad.result({ timeoutMs: 5_000 })).rejects.toThrow('card declined');

    const succeeded = await engine.client.getRun(ok.id);
    expect(succeeded).toMatchObject({ status: 'succeeded', attempt: 2 });
    expect(succeeded!.error).toBeUndefined();
    expect((await engine.client.getRun(bad.id))!.error).toMatchObject({ name: 'Error', message: 'card declined' });
    const rows = await engine.client.listRunSummaries({ limit: 10 });
    expect(rows.find((r) => r.id === ok.id)!.error).toBeUndefined();
    expect(rows.find((r) => r.id === bad.id)!.error).toEqual({ name: 'Error', message: 'card declined' });
  });

  it('after a cancel, steps that waited (a signal, a sleep, a child) read interrupted, with no pending wait', async () => {
    const child = engine.registry.define('child-waits', {}, async ({ step }) => step.waitForSignal('never', 'go', { timeout: '1h' }));
    const bySignal = engine.registry.define('waits-for-signal', {}, async ({ step }) => step.waitForSignal('approval', 'approve', { timeout: '1h' }));
    const bySleep = engine.registry.define('waits-for-time', {}, async ({ step }) => step.sleep('cool-off', 3_600_000));
    const byChild = engine.registry.define('waits-for-child', {}, async ({ step }) => step.runWorkflow('sub', child, {}));
    await engine.worker({ concurrency: 4 });
    const runs = await Promise.all([bySignal, bySleep, byChild].map((wf) => engine.client.start(wf, {})));
    const stepOf = async (id: string) => (await engine.client.getRunSteps(id))[0];
    await eventually(async () => (await Promise.all(runs.map((r) => stepOf(r.id)))).every((s) => s?.status === 'waiting'));
    expect(await stepOf(runs[0].id)).toMatchObject({ name: 'approval', status: 'waiting', signal: 'approve', wakeAt: expect.any(Number) });
    expect(await stepOf(runs[1].id)).toMatchObject({ name: 'cool-off', status: 'waiting', wakeAt: expect.any(Number) });

    for (const run of runs) await engine.client.cancelRun(run.id, { reason: 'no longer needed' });
    await eventually(async () => (await Promise.all(runs.map((r) => engine.client.getRun(r.id)))).every((r) => r!.status === 'canceled'));
    const ended = await Promise.all(runs.map((r) => stepOf(r.id)));
    expect(ended.map((s) => [s.name, s.status])).toEqual([
      ['approval', 'interrupted'],
      ['cool-off', 'interrupted'],
      ['sub', 'interrupted'],
    ]);
    for (const step of ended) {
      expect(step.signal).toBeUndefined();
      expect(step.wakeAt).toBeUndefined();
    }
    // The child step keeps its link to the child run.
    expect(ended[2].childRunId).toEqual(expect.any(String));
  });

  it('startedAt is the first start: a run that waited and retried reports how long it took in all', async () => {
    let attempts = 0;
    const slow = engine.registry.define('waits-then-retries', { retries: { maxAttempts: 2, delay: 10 } }, async ({ step }) => {
      await step.sleep('pause', 300);
      if (++attempts === 1) throw new Error('first attempt fails after the wait');
      return 'done';
    });
    await engine.worker();
    const before = Date.now();
    const run = await engine.client.start(slow, {});
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('done');
    const state = (await engine.client.getRun(run.id))!;
    expect(state).toMatchObject({ status: 'succeeded', attempt: 2 });
    // The first claim came before the 300 ms wait; later claims (after the wait, the retry) kept it.
    expect(state.startedAt! - before).toBeLessThan(300);
    expect(state.finishedAt! - state.startedAt!).toBeGreaterThanOrEqual(300);
    const row = (await engine.client.listRunSummaries({ limit: 10 })).find((r) => r.id === run.id)!;
    expect(row.durationMs).toBe(state.finishedAt! - state.startedAt!);
  });

  it("getRunAttempts: each attempt's end and error, oldest first; a run that succeeds at once stores no attempt record", async () => {
    let tries = 0;
    const flaky = engine.registry.define('twice-flaky', { retries: { maxAttempts: 3, delay: 10 } }, async () => {
      tries++;
      if (tries < 3) throw new Error(`network down (try ${tries})`);
      return 'ok';
    });
    const broken = engine.registry.define('always-broken', { retries: { maxAttempts: 2, delay: 10 } }, async () => {
      throw new Error('card declined');
    });
    const quick = engine.registry.define('quick', {}, async () => 'fast');
    await engine.worker();
    const [a, b, c] = [await engine.client.start(flaky, {}), await engine.client.start(broken, {}), await engine.client.start(quick, {})];
    await expect(a.result({ timeoutMs: 5_000 })).resolves.toBe('ok');
    await expect(b.result({ timeoutMs: 5_000 })).rejects.toThrow('card declined');
    await expect(c.result({ timeoutMs: 5_000 })).resolves.toBe('fast');

    const flakyAttempts = await engine.client.getRunAttempts(a.id);
    expect(flakyAttempts.map((x) => [x.attempt, x.outcome, x.error?.message])).toEqual([
      [1, 'retry', 'network down (try 1)'],
      [2, 'retry', 'network down (try 2)'],
      [3, 'succeeded', undefined],
    ]);
    expect(flakyAttempts[0].error!.stack).toContain('network down (try 1)');
    expect(flakyAttempts[0].finishedAt).toBeLessThanOrEqual(flakyAttempts[2].finishedAt);
    expect((await engine.client.getRunAttempts(b.id)).map((x) => [x.attempt, x.outcome, x.error?.message])).toEqual([
      [1, 'retry', 'card declined'],
      [2, 'failed', 'card declined'],
    ]);
    const run = (await engine.client.getRun(c.id))!;
    expect(await engine.client.getRunAttempts(c.id)).toEqual([{ attempt: 1, outcome: 'succeeded', finishedAt: run.finishedAt }]);
    // Nothing is stored for it: the happy path pays nothing for attempt history.
    expect(Object.keys(await engine.redis.hgetall(engine.client.keys.run(c.id))).filter((f) => f.startsWith('a:'))).toEqual([]);
    expect(await engine.client.getRunAttempts('no-such-run')).toEqual([]);
  });
});
