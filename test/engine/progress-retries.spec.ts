import { ConfigurationError, NonRetriableError, PayloadTooLargeError, RunNotFoundError, type WorkflowContext } from '../../lib';
import { checkStepRetry } from '../../lib/core/definition/option-checks';
import { stepRetryDelayMs } from '../../lib/core/definition/retry';
import { eventually, TestEngine } from '../support/engine';

/**
 * Values out of a running run (`step.setProgress`, `ctx.setEvent` / `client.getRunEvent`) and
 * retries per step (`step.run({ retries })`).
 */
describe('progress and run events', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('getRun shows the latest progress while the run goes on and after it ended', async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const importer = engine.registry.define('importer', {}, async ({ step }) => {
      await step.setProgress({ done: 1, of: 3 });
      await step.run('first', () => 1);
      await step.setProgress({ done: 2, of: 3 });
      await gate;
      await step.setProgress({ done: 3, of: 3 });
      return 'imported';
    });
    await engine.worker();
    const handle = await engine.client.start(importer, {});
    await eventually(async () => ((await engine.client.getRun(handle.id))?.progress as { done?: number } | undefined)?.done === 2);
    expect((await engine.client.getRun(handle.id))!.status).toBe('running');
    release();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('imported');
    expect((await engine.client.getRun(handle.id))!.progress).toEqual({ done: 3, of: 3 });
  });

  it('refuses progress over 64 KiB with PayloadTooLargeError, and the run can go on', async () => {
    const big = engine.registry.define('big-progress', {}, async ({ step }) => {
      const error = await step.setProgress('x'.repeat(70 * 1024)).then(
        () => null,
        (e: unknown) => e,
      );
      await step.setProgress('small');
      return error instanceof PayloadTooLargeError ? error.message : 'accepted';
    });
    await engine.worker();
    const handle = await engine.client.start(big, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toMatch(/progress of the run/);
    expect((await engine.client.getRun(handle.id))!.progress).toBe('small');
  });

  it('getRunEvent waits for a value the run publishes, and returns null when the run ends without it', async () => {
    const checkout = engine.registry.define('checkout', {}, async ({ step, setEvent }: WorkflowContext<unknown>) => {
      await step.sleep('pause', 100);
      await setEvent('payment-url', { url: 'https://pay.example/abc' });
      await setEvent('status', 'pending');
      await setEvent('status', 'paid');
      return 'ok';
    });
    await engine.worker();
    const handle = await engine.client.start(checkout, {});
    // Asked before the value exists: the reader waits for it.
    const started = Date.now();
    await expect(engine.client.getRunEvent(handle.id, 'payment-url', { timeoutMs: 5_000 })).resolves.toEqual({ url: 'https://pay.example/abc' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
    await handle.result({ timeoutMs: 5_000 });
    await expect(engine.client.getRunEvent(handle.id, 'status')).resolves.toBe('paid');
    // The run ended without this key: null at once, not after the timeout.
    const before = Date.now();
    await expect(engine.client.getRunEvent(handle.id, 'never-set', { timeoutMs: 10_000 })).resolves.toBeNull();
    expect(Date.now() - before).toBeLessThan(1_000);
  });

  it('getRunEvent returns null at its timeout, and names a missing run', async () => {
    const slow = engine.registry.define('slow-publisher', {}, async ({ step }) => {
      await step.waitForSignal('hold', 'never', { timeout: '5s' });
      return 'done';
    });
    await engine.worker();
    const handle = await engine.client.start(slow, {});
    const started = Date.now();
    await expect(engine.client.getRunEvent(handle.id, 'result', { timeoutMs: 150 })).resolves.toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(140);
    await expect(engine.client.getRunEvent('no-such-run', 'result', { timeoutMs: 100 })).rejects.toThrow(RunNotFoundError);
    await expect(engine.client.getRunEvent(handle.id, '', { timeoutMs: 100 })).rejects.toThrow(ConfigurationError);
  });
});

describe('retries per step', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('computes fixed, linear and exponential delays, capped by maxDelay and shortened by jitter', () => {
    const policy = (p: object) => checkStepRetry(p, 'retries');
    expect([1, 2, 3].map((n) => stepRetryDelayMs(policy({ backoff: 'fixed', delay: 100 }), n))).toEqual([100, 100, 100]);
    expect([1, 2, 3].map((n) => stepRetryDelayMs(policy({ backoff: 'linear', delay: 100 }), n))).toEqual([100, 200, 300]);
    expect([1, 2, 3, 4].map((n) => stepRetryDelayMs(policy({ delay: '1s', maxDelay: '5s' }), n))).toEqual([1_000, 2_000, 4_000, 5_000]);
    expect(stepRetryDelayMs(policy({ backoff: 'fixed', delay: 1_000, jitter: 0.5 }), 1, () => 1)).toBe(500);
    expect(() => policy({ backoff: 'cubic' })).toThrow(/backoff must be 'fixed', 'linear' or 'exponential'/);
    expect(() => policy({ maxAttempts: 0 })).toThrow(/maxAttempts must be an integer from 1 to 1000/);
    expect(() => policy({ delay: '2s', maxDelay: '1s' })).toThrow(/maxDelay \(1000 ms\) must not be shorter than delay/);
    expect(() => policy({ jitter: 2 })).toThrow(/jitter must be a number from 0 to 1/);
    expect(() => policy({ maxAtempts: 2 })).toThrow(ConfigurationError);
  });

  it('retries a failing step 3 times with backoff before the run-level retry, freeing the slot during a long delay', async () => {
    let tries = 0;
    const tryTimes: number[] = [];
    const flaky = engine.registry.define('flaky', {}, async ({ step }) => {
      const before = await step.run('before', () => 'once');
      const charged = await step.run({ name: 'charge', retries: { maxAttempts: 4, backoff: 'exponential', delay: 50, maxDelay: '1s' } }, () => {
        tryTimes.push(Date.now());
        if (++tries < 3) throw new Error(`card network down (try ${tries})`);
        if (tries === 3) throw new Error('card network still down');
        return 'charged';
      });
      return { before, charged };
    });
    const other = engine.registry.define('other', {}, () => 'other done');
    await engine.worker({ concurrency: 1 });
    const handle = await engine.client.start(flaky, {});
    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toEqual({ before: 'once', charged: 'charged' });
    expect(tries).toBe(4);
    // Exponential from 50 ms, capped at 1 s: 50, 100, then 200 ms between tries.
    expect(tryTimes[1] - tryTimes[0]).toBeGreaterThanOrEqual(45);
    expect(tryTimes[2] - tryTimes[1]).toBeGreaterThanOrEqual(95);
    expect(tryTimes[3] - tryTimes[2]).toBeGreaterThanOrEqual(195);
    const run = (await engine.client.getRun(handle.id))!;
    expect(run.attempt).toBe(1); // the run-level retry was never needed
    const steps = await engine.client.getRunSteps(handle.id);
    expect(steps.find((s) => s.name === 'charge')).toMatchObject({
      status: 'succeeded',
      attempts: 4,
      lastError: { name: 'Error', message: 'card network still down' },
    });
    expect(steps.find((s) => s.name === 'before')).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(steps.find((s) => s.name === 'before')!.lastError).toBeUndefined();

    // A delay of 1 s or more frees the only slot: another run completes while this one waits.
    let slowTries = 0;
    const patient = engine.registry.define('patient', {}, async ({ step }) =>
      step.run({ name: 'call', retries: { maxAttempts: 2, backoff: 'fixed', delay: '1s' } }, () => {
        if (++slowTries === 1) throw new Error('busy');
        return 'answered';
      }),
    );
    const slow = await engine.client.start(patient, {});
    await eventually(async () => (await engine.client.getRun(slow.id))?.status === 'scheduled');
    const waiting = (await engine.client.getRunSteps(slow.id)).find((s) => s.name === 'call')!;
    expect(waiting).toMatchObject({ status: 'failed', attempts: 1, lastError: { message: 'busy' } });
    expect(waiting.retryAt! - Date.now()).toBeGreaterThan(500);
    await expect((await engine.client.start(other, {})).result({ timeoutMs: 5_000 })).resolves.toBe('other done');
    expect((await engine.client.getRun(slow.id))!.status).toBe('scheduled');
    await expect(slow.result({ timeoutMs: 5_000 })).resolves.toBe('answered');
    expect(slowTries).toBe(2);
    expect((await engine.client.getRun(slow.id))!.attempt).toBe(1);
  });

  it('retries one step 4 times with exponential backoff crossing 1 s: each retry from 1 s on frees the slot, and the step shows every try', async () => {
    // Exponential from 250 ms, capped at 1 s: 250 and 500 ms in process, then 1 s and 1 s in `scheduled`.
    const delays = [250, 500, 1_000, 1_000];
    let tries = 0;
    let bodies = 0;
    const startedAt: number[] = [];
    const failedAt: number[] = [];
    const flaky = engine.registry.define('backoff', {}, async ({ step }) => {
      bodies++;
      return step.run({ name: 'call', retries: { maxAttempts: 5, backoff: 'exponential', delay: 250, maxDelay: '1s' } }, () => {
        startedAt.push(Date.now());
        if (++tries <= 4) {
          failedAt.push(Date.now());
          throw new Error(`down (try ${tries})`);
        }
        return `answered at try ${tries}`;
      });
    });
    const other = engine.registry.define('other', {}, () => 'other done');
    await engine.worker({ concurrency: 1 });
    const handle = await engine.client.start(flaky, {});
    const call = async () => (await engine.client.getRunSteps(handle.id)).find((s) => s.name === 'call');

    for (const failed of [3, 4]) {
      // Try `failed` failed with a retry 1 s away: the run waits in `scheduled`, its slot free.
      await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled' && (await call())?.attempts === failed, 10_000);
      const waiting = (await call())!;
      expect(waiting).toMatchObject({ status: 'failed', attempts: failed, lastError: { message: `down (try ${failed})` } });
      expect(waiting.retryAt! - failedAt[failed - 1]).toBeGreaterThanOrEqual(delays[failed - 1] - 5);
      // Another run goes through on the only slot while this one waits, and the step is not tried early.
      await expect((await engine.client.start(other, {})).result({ timeoutMs: 5_000 })).resolves.toBe('other done');
      expect(tries).toBe(failed);
      expect((await engine.client.getRun(handle.id))!.status).toBe('scheduled');
    }

    await expect(handle.result({ timeoutMs: 10_000 })).resolves.toBe('answered at try 5');
    expect(tries).toBe(5);
    // No try came before its delay was over.
    for (let i = 0; i < 4; i++) expect(startedAt[i + 1] - failedAt[i]).toBeGreaterThanOrEqual(delays[i] - 5);
    // The handler ran 3 times: tries 1 to 3 in the first claim (the short delays held the slot),
    // then one claim after each 1 s wait. The run-level attempt never changed.
    expect(bodies).toBe(3);
    expect((await engine.client.getRun(handle.id))!.attempt).toBe(1);
    const done = (await call())!;
    expect(done).toMatchObject({ status: 'succeeded', attempts: 5, lastError: { message: 'down (try 4)' }, output: 'answered at try 5' });
    expect(done.retryAt).toBeUndefined();
  });

  it('a step woken before its retry is due (a parallel signal wait ended first) waits again until it is', async () => {
    let tries = 0;
    let bodies = 0;
    const tryTimes: number[] = [];
    const nudged = engine.registry.define('nudged', {}, async ({ step }) => {
      bodies++;
      // The signal wait comes first, so its script is sent before the step's first try fails and
      // suspends the attempt: both the wait and the failed try are recorded by that suspension.
      const [nudge, answer] = await Promise.all([
        step.waitForSignal<{ n: number }>('nudge', 'nudge'),
        step.run({ name: 'call', retries: { maxAttempts: 2, backoff: 'fixed', delay: '2s' } }, async () => {
          tryTimes.push(Date.now());
          if (++tries === 1) throw new Error('busy');
          return 'answered';
        }),
      ]);
      return [answer, nudge];
    });
    await engine.worker({ concurrency: 1 });
    const handle = await engine.client.start(nudged, {});
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
    const call = async () => (await engine.client.getRunSteps(handle.id)).find((s) => s.name === 'call')!;
    const { retryAt } = await call();
    expect(retryAt! - tryTimes[0]).toBeGreaterThanOrEqual(1_995);

    // The signal wakes the run well before retryAt (2 s away): the replay takes the signal, and the
    // step suspends again without a try.
    expect(await engine.client.signal(handle.id, 'nudge', { n: 1 })).toBe(true);
    await eventually(async () => bodies === 2 && (await engine.client.getRun(handle.id))?.status === 'scheduled');
    expect(Date.now()).toBeLessThan(retryAt!);
    expect(tries).toBe(1);
    expect(await call()).toMatchObject({ status: 'failed', attempts: 1, retryAt });
    expect((await engine.client.getRunSteps(handle.id)).find((s) => s.name === 'nudge')).toMatchObject({ status: 'succeeded', output: { n: 1 } });

    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual(['answered', { n: 1 }]);
    expect(tries).toBe(2);
    expect(tryTimes[1]).toBeGreaterThanOrEqual(retryAt!);
    expect(bodies).toBe(3);
    expect(await call()).toMatchObject({ status: 'succeeded', attempts: 2 });
  });

  it('a step whose retries run out fails the attempt; the run-level retry gives it its budget again', async () => {
    let tries = 0;
    const stubborn = engine.registry.define('stubborn', { maxAttempts: 2, retries: { delay: 10 } }, async ({ step }) =>
      step.run({ name: 'call', retries: { maxAttempts: 2, delay: 0 } }, () => {
        tries++;
        if (tries < 4) throw new Error(`fail ${tries}`);
        return tries;
      }),
    );
    await engine.worker();
    const handle = await engine.client.start(stubborn, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe(4);
    expect((await engine.client.getRun(handle.id))!.attempt).toBe(2);
    expect((await engine.client.getRunSteps(handle.id))[0]).toMatchObject({ status: 'succeeded', attempts: 4, lastError: { message: 'fail 3' } });
  });

  it('NonRetriableError skips the step retries', async () => {
    let tries = 0;
    const strict = engine.registry.define('strict', {}, async ({ step }) =>
      step.run({ name: 'validate', retries: { maxAttempts: 5, delay: 0 } }, () => {
        tries++;
        throw new NonRetriableError('bad card number');
      }),
    );
    await engine.worker();
    const handle = await engine.client.start(strict, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('bad card number');
    expect(tries).toBe(1);
    expect((await engine.client.getRunSteps(handle.id))[0]).toMatchObject({ status: 'failed', attempts: 1, lastError: { name: 'NonRetriableError' } });
  });

  it('a bad retries option fails the step with a ConfigurationError naming the step', async () => {
    const wrong = engine.registry.define('wrong-retries', {}, async ({ step }) =>
      step.run({ name: 'x', retries: { backoff: 'sometimes' as 'fixed' } }, () => 1),
    );
    await engine.worker();
    const handle = await engine.client.start(wrong, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow(/retries of step "x" backoff must be/);
  });
});
