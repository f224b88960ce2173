import { SignalBufferFullError, type WorkflowContext } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

/**
 * Signals into a run: `client.signal(runId, name, payload)` and `step.waitForSignal`. A waiting
 * run holds no worker slot; a signal is consumed once, by one wait, and replays return the
 * payload from the step record.
 */
describe('signals', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;

  it('a run waiting for a signal holds no worker slot, and resumes with the payload when it comes', async () => {
    const approval = engine.registry.define('approval', {}, async ({ step, input }: WorkflowContext<{ order: string }>) => {
      const decision = await step.waitForSignal<{ approved: boolean }>('await-approval', 'approval');
      return { order: input.order, approved: decision?.approved };
    });
    const other = engine.registry.define('other', {}, () => 'other done');
    await engine.worker({ concurrency: 1 });
    const handle = await engine.client.start(approval, { order: 'o-1' });
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
    expect(await engine.client.getRunSteps(handle.id)).toEqual([expect.objectContaining({ name: 'await-approval', status: 'waiting', signal: 'approval' })]);
    // The only worker slot is free: another run goes through while this one waits.
    await expect((await engine.client.start(other, {})).result({ timeoutMs: 5_000 })).resolves.toBe('other done');
    expect(await statusOf(handle.id)).toBe('scheduled');

    expect(await engine.client.signal(handle.id, 'approval', { approved: true })).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ order: 'o-1', approved: true });
    expect(await engine.client.getRunSteps(handle.id)).toEqual([
      expect.objectContaining({ name: 'await-approval', status: 'succeeded', output: { approved: true } }),
    ]);
    // The run has ended: a late signal is refused.
    expect(await engine.client.signal(handle.id, 'approval', { approved: false })).toBe(false);
  });

  it('buffers signals sent before the wait and hands them out oldest first, each to one wait', async () => {
    const collect = engine.registry.define('collect', {}, async ({ step }) => {
      await step.sleep('let-signals-arrive', 1);
      const first = await step.waitForSignal('first', 'item');
      const second = await step.waitForSignal('second', 'item');
      const other = await step.waitForSignal('other', 'note');
      return [first, second, other];
    });
    const handle = await engine.client.start(collect, {});
    // No worker yet: the run is queued, and every signal is buffered.
    expect(await engine.client.signal(handle.id, 'item', 1)).toBe(true);
    expect(await engine.client.signal(handle.id, 'note', 'n')).toBe(true);
    expect(await engine.client.signal(handle.id, 'item', 2)).toBe(true);
    expect(await engine.client.signal(handle.id, 'item', 3)).toBe(true);
    expect(await engine.redis.llen(engine.client.keys.signals(handle.id))).toBe(4);
    await engine.worker();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual([1, 2, 'n']);
    // The third "item" was never consumed; it went with the run when the run ended.
    expect(await engine.redis.exists(engine.client.keys.signals(handle.id))).toBe(0);
  });

  it('returns null when the timeout passes first, and a signal that comes later is not consumed by it', async () => {
    const patient = engine.registry.define('patient', {}, async ({ step }) => {
      const got = await step.waitForSignal('reply', 'reply', { timeout: 150 });
      const next = await step.waitForSignal('next', 'reply', { timeout: '5s' });
      return { got, next };
    });
    await engine.worker();
    const handle = await engine.client.start(patient, {});
    await eventually(async () => (await engine.client.getRunSteps(handle.id)).some((s) => s.name === 'reply' && s.status === 'succeeded'), 5_000);
    expect((await engine.client.getRunSteps(handle.id)).find((s) => s.name === 'reply')).toMatchObject({ status: 'succeeded', output: null });
    expect(await engine.client.signal(handle.id, 'reply', 'late')).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ got: null, next: 'late' });
  });

  it('a signal racing the timeout is taken by exactly one outcome', async () => {
    const racer = engine.registry.define('racer', { maxConcurrency: Infinity }, async ({ step }) => {
      const got = await step.waitForSignal('race', 'go', { timeout: 100 });
      const leftover = await step.waitForSignal('leftover', 'go', { timeout: 50 });
      return [got, leftover];
    });
    await engine.worker({ concurrency: 8 });
    const handles = await Promise.all(Array.from({ length: 8 }, () => engine.client.start(racer, {})));
    await new Promise((resolve) => setTimeout(resolve, 100));
    const accepted = await Promise.all(handles.map((h) => engine.client.signal(h.id, 'go', 'signal')));
    const results = await Promise.all(handles.map((h) => h.result({ timeoutMs: 5_000 })));
    // A signal the run accepted is consumed by exactly one of its waits; one refused (the run had
    // already ended, both waits timed out) by none.
    results.forEach((result, i) => {
      if (accepted[i])
        expect([
          ['signal', null],
          [null, 'signal'],
        ]).toContainEqual(result);
      else expect(result).toEqual([null, null]);
    });
  });

  it('a signal delivered between the claim of a timed-out wait and its wait call is kept, not overwritten by the timeout', async () => {
    const approval = engine.registry.define('approval', {}, async ({ step }) => step.waitForSignal('await-approval', 'approval', { timeout: '1h' }));
    const worker = await engine.worker();
    const handle = await engine.client.start(approval, {});
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
    await worker.stop();
    // As a worker does when the deadline wakes the run: it claims the run (status running, its lease
    // token) holding the step's waiting record, and only then calls wait-signal. The signal comes in
    // between, and the wait call comes after the deadline.
    const runKey = engine.client.keys.run(handle.id);
    const field = (await engine.redis.hget(runKey, 'sigwait:approval'))!;
    expect(field).toEqual(expect.any(String));
    await engine.redis.hset(runKey, 'status', 'running', 'lease', 'claim-token');
    expect(await engine.client.signal(handle.id, 'approval', { approved: true })).toBe(true);
    const target = { runId: handle.id, token: 'claim-token', field, seq: 0, attempt: 1 };
    const late = Date.now() + 2 * 3_600_000;
    const first = await engine.client.scripts.waitSignal(target, 'approval', late, late);
    expect(first.code).toBe('got');
    expect(JSON.parse(first.record)).toContainEqual({ approved: true });
    // A retried call (its first reply lost) returns the same record and takes no buffered signal.
    expect(await engine.client.signal(handle.id, 'approval', { approved: false })).toBe(true);
    expect(await engine.client.scripts.waitSignal(target, 'approval', late, late)).toEqual(first);
    expect(await engine.redis.llen(engine.client.keys.signals(handle.id))).toBe(1);
  });

  it('a replayed wait returns the payload from its record and never consumes a second signal', async () => {
    let attempts = 0;
    const flaky = engine.registry.define('flaky', { retries: { maxAttempts: 2, delay: 300 } }, async ({ step, run }) => {
      attempts++;
      const got = await step.waitForSignal('wait', 'value');
      if (run.attempt === 1) throw new Error('fails after the signal');
      return got;
    });
    await engine.worker();
    const handle = await engine.client.start(flaky, {});
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
    expect(await engine.client.signal(handle.id, 'value', 'first')).toBe(true);
    // Attempt 1 failed after the signal: while the retry is scheduled, a second signal comes.
    await eventually(async () => (await engine.client.getRun(handle.id))?.error?.message === 'fails after the signal');
    expect(await statusOf(handle.id)).toBe('scheduled');
    expect(await engine.client.signal(handle.id, 'value', 'second')).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('first');
    expect(attempts).toBe(3); // waited, resumed after the signal and failed, then the retry replayed the wait
  });

  it('refuses the 1,001st buffered signal with SignalBufferFullError, and signals to runs that ended or never existed', async () => {
    const idle = engine.registry.define('idle', { queue: 'parked' }, () => 'never runs');
    const { id } = await engine.client.start(idle, {});
    for (let i = 0; i < 1_000; i += 100) await Promise.all(Array.from({ length: 100 }, (_, j) => engine.client.signal(id, 'tick', i + j)));
    const refusal = await engine.client.signal(id, 'tick', 1_000).catch((error: unknown) => error);
    expect(refusal).toBeInstanceOf(SignalBufferFullError);
    expect(refusal).toMatchObject({ runId: id, signal: 'tick', limit: 1_000 });
    expect((refusal as Error).message).toBe(
      `Run "${id}" already holds 1000 signals that no step.waitForSignal has consumed, so signal "tick" was refused. Make the workflow wait for its signals, or send fewer.`,
    );
    expect(await engine.redis.llen(engine.client.keys.signals(id))).toBe(1_000);
    expect(await engine.client.cancelRun(id)).toBe(true);
    expect(await engine.client.signal(id, 'tick', 'late')).toBe(false);
    expect(await engine.redis.exists(engine.client.keys.signals(id))).toBe(0);
    expect(await engine.client.signal('no-such-run', 'tick', 1)).toBe(false);
    await expect(engine.client.signal(id, 'bad\nname', 1)).rejects.toThrow('The signal name must not contain control characters');
  });

  it('fails the run with a ConfigurationError naming an unknown option of waitForSignal', async () => {
    const bad = engine.registry.define('bad', {}, async ({ step }) => {
      await step.waitForSignal('w', 'x', { timout: 5 } as never);
    });
    await engine.worker();
    const error = await (await engine.client.start(bad, {})).result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ name: 'ConfigurationError' });
    expect((error as Error).message).toContain('"timout"');
  });
});
