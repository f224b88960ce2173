import { RetryAfterError } from '../../lib';
import { deferred, TestEngine } from '../support/engine';

/**
 * The engine's clock: `engine.clock.advance('1h')` makes every due time that is an hour away fire
 * at once (waits, retry delays, runAt, schedules, signal timeouts), while leases keep real time.
 */
describe('virtual clock', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('fires a waitFor of an hour when the clock advances an hour', async () => {
    const wf = engine.define('cooldown', {}, async ({ step }) => {
      await step.sleep('cool down', '1h');
      return 'done';
    });
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    expect(waiting.waits.map((s) => s.name)).toEqual(['cool down']);
    await engine.clock.advance('1h');
    const ended = await engine.runUntilWaiting(waiting.runId);
    expect(ended).toMatchObject({ status: 'succeeded', output: 'done' });
  });

  it('a parent waiting on a child run is waiting only while the child itself waits', async () => {
    const gate = deferred();
    const busy = engine.define('busy-child', {}, async () => {
      await gate.promise; // real work still going on
      return 'worked';
    });
    const sleepy = engine.define('sleepy-child', {}, async ({ step }) => {
      await step.sleep('nap', '1h');
      return 'rested';
    });
    const parent = engine.define('parent', {}, async ({ step, input }) => step.runWorkflow('child', (input as { sleepy: boolean }).sleepy ? sleepy : busy, {}));

    // The running child is not a wait: run() goes on until the parent ends.
    const ran = engine.run(parent, { sleepy: false });
    setTimeout(() => gate.resolve(), 300);
    await expect(ran).resolves.toMatchObject({ status: 'succeeded', output: 'worked' });

    // A child that sleeps an hour makes its parent wait, until the clock moves.
    const waiting = await engine.run(parent, { sleepy: true });
    expect(waiting.status).toBe('waiting');
    expect(waiting.waits).toEqual([expect.objectContaining({ name: 'child', childRunId: expect.any(String) })]);
    await engine.clock.advance('1h');
    await expect(engine.runUntilWaiting(waiting.runId)).resolves.toMatchObject({ status: 'succeeded', output: 'rested' });
  });

  it('step.now() reads the workflow clock once per place in the run; now, random and uuid come back unchanged on every replay', async () => {
    const seen: Array<{ t1: number; t2: number; r: number; id: string }> = [];
    const wf = engine.define('journaled', {}, async ({ step }) => {
      const t1 = step.now();
      const r = step.random();
      const id = step.uuid();
      await step.sleep('nap', '1h');
      const t2 = step.now(); // the second call: its own value, read after the nap
      seen.push({ t1, t2, r, id });
      return { t1, t2, r, id };
    });
    const startedAt = engine.clock.now();
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    await engine.clock.advance('1h');
    const done = await engine.runUntilWaiting(waiting.runId);
    expect(done.status).toBe('succeeded');
    const out = done.output as { t1: number; t2: number; r: number; id: string };
    // The first attempt stopped at the nap; the replay after it got the same first values.
    expect(seen).toHaveLength(1);
    expect(out.t1).toBeGreaterThanOrEqual(startedAt);
    expect(out.t1).toBeLessThan(startedAt + 60_000);
    expect(out.t2 - out.t1).toBeGreaterThanOrEqual(3_600_000);
    const hash = await engine.redis.hgetall(engine.client.keys.run(waiting.runId));
    expect([JSON.parse(hash['d:now']), JSON.parse(hash['d:now#2']), JSON.parse(hash['d:random']), JSON.parse(hash['d:uuid'])]).toEqual([
      out.t1,
      out.t2,
      out.r,
      out.id,
    ]);
    expect(done.steps.map((s) => s.name)).toEqual(['nap']);
  });

  it('step.patched: a run that went past the patch point before the deploy keeps the old path; a run started after takes the new one', async () => {
    let deployed = false;
    const ran: string[] = [];
    const wf = engine.define('patched-checkout', {}, async ({ step, input }) => {
      const tag = (input as { tag: string }).tag;
      await step.run('reserve', () => ran.push(`${tag}:reserve`));
      // Before the deploy the code has no patch point: it always charged in one step.
      if (deployed && step.patched('split-charge')) {
        await step.run('authorize', () => ran.push(`${tag}:authorize`));
        await step.run('capture', () => ran.push(`${tag}:capture`));
      } else {
        await step.run('charge', () => ran.push(`${tag}:charge`));
      }
      await step.sleep('cool down', '1h');
      await step.run('ship', () => ran.push(`${tag}:ship`));
      return deployed && step.patched('split-charge') ? 'new path' : 'old path';
    });
    const before = await engine.run(wf, { tag: 'r1' });
    expect(before.status).toBe('waiting');

    deployed = true; // the patched code is deployed while r1 waits
    const after = await engine.run(wf, { tag: 'r2' });
    expect(after.status).toBe('waiting');
    await engine.clock.advance('1h');
    await expect(engine.runUntilWaiting(before.runId)).resolves.toMatchObject({ status: 'succeeded', output: 'old path' });
    await expect(engine.runUntilWaiting(after.runId)).resolves.toMatchObject({ status: 'succeeded', output: 'new path' });
    // r1 replayed its charge from the journal (never authorize or capture); r2 ran the new steps.
    expect(ran.filter((r) => r.startsWith('r1:'))).toEqual(['r1:reserve', 'r1:charge', 'r1:ship']);
    expect(ran.filter((r) => r.startsWith('r2:'))).toEqual(['r2:reserve', 'r2:authorize', 'r2:capture', 'r2:ship']);
    const answers = await Promise.all([before.runId, after.runId].map((id) => engine.redis.hget(engine.client.keys.run(id), 'p:split-charge')));
    expect(answers).toEqual(['0', '1']);
  });

  it('step.patched: a run that started before the deploy but had not reached the patch point takes the new path', async () => {
    let deployed = false;
    const wf = engine.define('patched-late', {}, async ({ step }) => {
      await step.sleep('cool down', '1h'); // the run waits here, before the patch point
      return deployed && step.patched('new-receipt') ? 'new path' : 'old path';
    });
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    deployed = true;
    await engine.clock.advance('1h');
    await expect(engine.runUntilWaiting(waiting.runId)).resolves.toMatchObject({ status: 'succeeded', output: 'new path' });
  });

  it('a damaged journaled value fails the run with CorruptRunDataError naming the field', async () => {
    const wf = engine.define('journaled-damaged', {}, async ({ step }) => {
      step.uuid();
      await step.sleep('nap', '1h');
      return 'unreachable';
    });
    const waiting = await engine.run(wf, {});
    await engine.redis.hset(engine.client.keys.run(waiting.runId), 'd:uuid', '42');
    await engine.clock.advance('1h');
    const ended = await engine.runUntilWaiting(waiting.runId);
    expect(ended).toMatchObject({ status: 'failed', error: { name: 'CorruptRunDataError' } });
    expect(ended.error!.message).toContain('field "d:uuid" (the value of step.uuid()) is not a string');
  });

  it('fires a step retry delay and a run-level retry delay', async () => {
    let stepTries = 0;
    let runTries = 0;
    const wf = engine.define('flaky', { retries: { maxAttempts: 2, delay: '1h' } }, async ({ step }) => {
      const a = await step.run({ name: 'a', retries: { maxAttempts: 2, delay: '1h' } }, () => {
        if (++stepTries === 1) throw new Error('step flake');
        return stepTries;
      });
      if (++runTries === 1) throw new Error('run flake');
      return a;
    });
    const first = await engine.run(wf, {});
    expect(first.status).toBe('waiting');
    expect(stepTries).toBe(1);
    await engine.clock.advance('1h');
    expect((await engine.runUntilWaiting(first.runId)).status).toBe('waiting');
    expect([stepTries, runTries]).toEqual([2, 1]);
    await engine.clock.advance('1h');
    expect(await engine.runUntilWaiting(first.runId)).toMatchObject({ status: 'succeeded', output: 2 });
    expect([stepTries, runTries]).toEqual([2, 2]);
  });

  it('starts a run delayed by runAt when its time comes', async () => {
    const wf = engine.define('later', {}, () => 'ran');
    await engine.worker();
    const handle = await engine.client.start(wf, {}, { runAt: engine.clock.now() + 3_600_000 });
    expect((await engine.runUntilWaiting(handle.id)).status).toBe('waiting');
    await engine.clock.advance('1h');
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('ran');
  });

  it('fires a schedule tick an hour ahead', async () => {
    const ran = deferred<string>();
    engine.define('hourly', {}, ({ run }) => ran.resolve(run.id));
    await engine.worker();
    await engine.client.schedule('every-hour', { workflow: 'hourly', every: '1h' });
    await engine.clock.advance('1h');
    await expect(ran.promise).resolves.toEqual(expect.any(String));
  });

  it('fires an hourly cron tick when the clock advances an hour', async () => {
    const ran = deferred<string>();
    engine.registry.define('hourly-cron', { cron: [{ expression: '0 * * * *' }] }, ({ run }) => ran.resolve(run.id));
    await engine.worker();
    const nextHour = Math.floor(engine.clock.now() / 3_600_000) * 3_600_000 + 3_600_000;
    await engine.clock.advance('1h');
    await expect(ran.promise).resolves.toBe(`cron.hourly-cron#0.${nextHour}`);
  });

  it('times out a waitForSignal when its timeout has passed', async () => {
    const wf = engine.define('approval', {}, async ({ step }) => (await step.waitForSignal('approve', 'approved', { timeout: '1h' })) ?? 'timed out');
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    await engine.clock.advance('1h');
    expect(await engine.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'succeeded', output: 'timed out' });
  });

  it('does not let the reaper take a run whose step is in flight while the clock jumps', async () => {
    const inStep = deferred();
    const release = deferred();
    let calls = 0;
    const wf = engine.define('long-step', {}, async ({ step }) =>
      step.run('slow', async () => {
        calls++;
        inStep.resolve();
        await release.promise;
        return 'once';
      }),
    );
    await engine.worker();
    const handle = await engine.client.start(wf, {});
    await inStep.promise;
    await engine.clock.advance('1h');
    // Longer than the test lease (1 s): heartbeats must keep it, the reaper must not take it.
    await engine.clock.advance('1h');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect((await handle.getState())?.status).toBe('running');
    release.resolve();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('once');
    expect(calls).toBe(1);
  });

  it('mocks steps with an output and with an error (through the retry path)', async () => {
    let charged = 0;
    const wf = engine.define('checkout', {}, async ({ step }) => {
      const charge = await step.run('charge', () => ++charged);
      const email = await step.run({ name: 'email', retries: { maxAttempts: 2, delay: 10 } }, () => 'sent');
      return { charge, email };
    });
    const ok = await engine.run(wf, {}, { steps: { charge: { output: 42 } } });
    expect(ok).toMatchObject({ status: 'succeeded', output: { charge: 42, email: 'sent' } });
    expect(charged).toBe(0);
    expect(ok.steps.map((s) => [s.name, s.status])).toEqual([
      ['charge', 'succeeded'],
      ['email', 'succeeded'],
    ]);

    const failed = await engine.run(wf, {}, { steps: { email: { error: 'smtp down' } } });
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ message: 'smtp down' });
    expect(failed.steps.find((s) => s.name === 'email')).toMatchObject({ status: 'failed', attempts: 2 });
    expect(charged).toBe(1);
  });

  it('runs until a signal wait, then on after the signal', async () => {
    const wf = engine.define('approve', {}, async ({ step }) => {
      const by = await step.waitForSignal('approval', 'approved');
      return { by };
    });
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    expect(waiting.waits).toEqual([expect.objectContaining({ name: 'approval', signal: 'approved' })]);
    await engine.signal(waiting.runId, 'approved', 'ann');
    expect(await engine.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'succeeded', output: { by: 'ann' } });
  });

  it('emits an event that a waiting run receives', async () => {
    const wf = engine.define('paid', {}, async ({ step }) => step.waitForEvent('payment', 'payment.received'));
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    await engine.emit('payment.received', { amount: 5 });
    expect(await engine.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'succeeded', output: { amount: 5 } });
  });

  it('honours RetryAfterError delays in virtual time', async () => {
    let tries = 0;
    const wf = engine.define('rate-limited', {}, async ({ step }) =>
      step.run({ name: 'call', retries: { maxAttempts: 2 } }, () => {
        if (++tries === 1) throw new RetryAfterError('429', '1h');
        return tries;
      }),
    );
    const waiting = await engine.run(wf, {});
    expect(waiting.status).toBe('waiting');
    await engine.clock.advance('1h');
    expect(await engine.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'succeeded', output: 2 });
  });
});
