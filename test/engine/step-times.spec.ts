import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * Step times tell the truth: a wait (sleep, signal, child) lasts from when it began to when it
 * ended, and a step retried by its own policy lists each of its tries.
 */
describe('step times: waits from their start, and every try of a retried step', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const stepOf = async (runId: string, name: string) => (await engine.client.getRunSteps(runId)).find((s) => s.name === name)!;

  it('a step that fails twice and then succeeds under its retry policy lists 3 tries, the first two with their errors', async () => {
    let calls = 0;
    const flaky = engine.registry.define('flaky-step', {}, async ({ step }) =>
      step.run({ name: 'charge', retries: { maxAttempts: 3, delay: 20, backoff: 'fixed' } }, () => {
        calls++;
        if (calls < 3) throw new Error(`network down (try ${calls})`);
        return 'charged';
      }),
    );
    const steady = engine.registry.define('steady-step', {}, async ({ step }) => step.run('work', () => 'done'));
    await engine.worker();
    const run = await engine.client.start(flaky, {});
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('charged');

    const charge = await stepOf(run.id, 'charge');
    expect(charge).toMatchObject({ status: 'succeeded', attempts: 3, lastError: { message: 'network down (try 2)' } });
    const tries = charge.tries!;
    expect(tries).toHaveLength(3);
    expect(tries.map((t) => [t.attempt, t.error])).toEqual([
      [1, { name: 'Error', message: 'network down (try 1)' }],
      [1, { name: 'Error', message: 'network down (try 2)' }],
      [1, undefined],
    ]);
    for (const t of tries) expect(t.finishedAt).toBeGreaterThanOrEqual(t.startedAt);
    // Each try starts after the one before it ended and the 20 ms delay passed (a timer may fire a
    // few ms early by Date.now()).
    for (const i of [1, 2]) {
      expect(tries[i].startedAt).toBeGreaterThan(tries[i - 1].startedAt);
      expect(tries[i].startedAt).toBeGreaterThanOrEqual(tries[i - 1].finishedAt + 15);
    }
    // The step's own times are its last try's.
    expect([charge.startedAt, charge.finishedAt]).toEqual([tries[2].startedAt, tries[2].finishedAt]);

    // A step that never failed has no tries list.
    const ok = await engine.client.start(steady, {});
    await ok.result({ timeoutMs: 5_000 });
    const work = await stepOf(ok.id, 'work');
    expect(work).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(work.tries).toBeUndefined();
  });

  it("a waitFor('200ms') step starts when its wait began and finishes when it ended", async () => {
    const nap = engine.registry.define('nap', {}, async ({ step }) => {
      await step.sleep('nap', '200ms');
      return 'rested';
    });
    await engine.worker();
    const before = Date.now();
    const run = await engine.client.start(nap, {});
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('rested');
    const step = await stepOf(run.id, 'nap');
    expect(step.status).toBe('succeeded');
    expect(step.startedAt).toBeGreaterThanOrEqual(before);
    expect(step.finishedAt! - step.startedAt!).toBeGreaterThanOrEqual(200);
  });

  it('a signal wait lasts until the signal was sent; a child step lasts as long as its child run', async () => {
    const gate = deferred();
    const child = engine.registry.define('slow-child', {}, async ({ step }) => step.run('work', () => gate.promise.then(() => 'child done')));
    const parent = engine.registry.define('parent-of-slow', {}, async ({ step }) => step.runWorkflow('child', child, {}));
    const approval = engine.registry.define('approval', {}, async ({ step }) => step.waitForSignal('approval', 'approve'));
    await engine.worker({ concurrency: 4 });

    const waiting = await engine.client.start(approval, {});
    await eventually(async () => (await engine.client.getRun(waiting.id))?.waitingFor);
    const waitStep = await stepOf(waiting.id, 'approval');
    expect(waitStep).toMatchObject({ status: 'waiting', signal: 'approve', startedAt: expect.any(Number) });
    await new Promise((r) => setTimeout(r, 150));
    const sentAt = Date.now();
    await engine.client.signal(waiting.id, 'approve', 'yes');
    await waiting.result({ timeoutMs: 5_000 });
    const signaled = await stepOf(waiting.id, 'approval');
    expect(signaled).toMatchObject({ status: 'succeeded', signal: 'approve', output: 'yes' });
    expect(signaled.startedAt).toBe(waitStep.startedAt);
    expect(signaled.finishedAt).toBeGreaterThanOrEqual(sentAt);
    expect(signaled.finishedAt! - signaled.startedAt!).toBeGreaterThanOrEqual(150);

    const run = await engine.client.start(parent, {});
    const childId = `${run.id}.child`;
    await eventually(async () => (await engine.client.getRun(run.id))?.waitingFor);
    await new Promise((r) => setTimeout(r, 100));
    gate.resolve();
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('child done');
    const childRun = (await engine.client.getRun(childId))!;
    const childStep = await stepOf(run.id, 'child');
    expect(childStep).toMatchObject({ status: 'succeeded', childRunId: childId, output: 'child done' });
    expect(childStep.startedAt).toBeLessThanOrEqual(childRun.createdAt);
    expect(childStep.finishedAt).toBeGreaterThanOrEqual(childRun.finishedAt!);
    expect(childStep.finishedAt! - childStep.startedAt!).toBeGreaterThanOrEqual(100);
  });

  it('a finished wait still names what it waited for, and a child without output replays as undefined', async () => {
    const seen: string[] = [];
    const quiet = engine.registry.define('quiet-child', {}, async ({ step }) => {
      await step.run('work', () => 1);
    });
    const parent = engine.registry.define('parent-of-quiet', {}, async ({ step }) => {
      const output = await step.runWorkflow('child', quiet, {});
      seen.push(typeof output);
      return step.run('after', () => typeof output);
    });
    await engine.worker({ concurrency: 2 });
    const run = await engine.client.start(parent, {});
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('undefined');
    const step = await stepOf(run.id, 'child');
    expect(step).toMatchObject({ status: 'succeeded', childRunId: `${run.id}.child` });
    expect('output' in step).toBe(false);
    // Every time the parent ran past the wait (once after it ended, replayed from its record), the output was undefined.
    expect(seen.length).toBeGreaterThan(0);
    expect(new Set(seen)).toEqual(new Set(['undefined']));
  });

  it('step.waitFor, the former name of step.sleep, is the same step: a run that slept with one resumes with the other', async () => {
    const gate = { renamed: false };
    const nap = engine.registry.define('renamed-nap', {}, async ({ step }) => {
      // The first attempt runs the old code, the replay after the wake the new one.
      if (gate.renamed) await step.sleep('nap', '80ms');
      else await step.waitFor('nap', '80ms');
      return step.run('after', () => 'rested');
    });
    await engine.worker();
    const run = await engine.client.start(nap, {});
    await eventually(async () => (await engine.client.getRun(run.id))?.waitingFor?.kind === 'sleep');
    gate.renamed = true;
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe('rested');
    expect((await stepOf(run.id, 'nap')).status).toBe('succeeded');
  });
});
