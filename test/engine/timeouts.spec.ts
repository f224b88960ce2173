import {
  ConfigurationError,
  createClient,
  RunTimeoutError,
  StepHeartbeatTimeoutError,
  TimeoutError,
  WorkflowRegistry,
  type StepApi,
  type WorkflowContext,
} from '../../lib';
import { connect, deferred, eventually, TestEngine } from '../support/engine';

/**
 * Run timeouts (`timeout` of a workflow or of one run: from the first start, waits included; the
 * run fails for good with RunTimeoutError through the worker's final-failure path) and step
 * heartbeats (`heartbeatTimeout` of step.run: a try that stops calling heartbeat() fails with
 * StepHeartbeatTimeoutError and is retried by the step's own policy).
 */
describe('run timeout', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const runHash = (id: string) => engine.redis.hgetall(engine.client.keys.run(id));

  // Every kind of wait: the run must wake at its deadline to fail, whatever it waits for.
  const waits: Array<[string, (step: StepApi) => Promise<unknown>]> = [
    ['a signal that never comes', (step) => step.waitForSignal('await-approval', 'approval')],
    ['a timer longer than the timeout', (step) => step.sleep('sleep', '1h')],
    ['an event that never comes', (step) => step.waitForEvent('await-shipment', 'order.shipped', { match: { orderId: 'o-1' } })],
    ['a child run that never ends', (step) => step.runWorkflow('child', 'never-ending-child', {})],
  ];

  it.each(waits)('fails a run waiting for %s at its deadline with RunTimeoutError, once, without retrying', async (_kind, wait) => {
    engine.registry.define('never-ending-child', { maxConcurrency: Infinity }, ({ step }) => step.waitForSignal('forever', 'never'));
    const failures: unknown[] = [];
    const reserved: string[] = [];
    const order = engine.registry.define('order', { timeout: 400, maxAttempts: 5, onFailure: ({ error }) => void failures.push(error) }, async ({ step }) => {
      await step.run('reserve', () => reserved.push('reserved'));
      await wait(step);
      return 'shipped';
    });
    await engine.worker({ concurrency: 4 });
    const handle = await engine.client.start(order, {});

    // Waiting: its due time is its deadline, the first start + 400 ms.
    await eventually(async () => (await runHash(handle.id)).status === 'scheduled');
    const waiting = await runHash(handle.id);
    expect(Number(waiting.deadline) - Number(waiting.startedAt)).toBe(400);
    expect(waiting.availableAt).toBe(waiting.deadline);
    expect(await engine.redis.zscore(engine.client.keys.scheduled('default'), handle.id)).toBe(waiting.deadline);

    const error = await handle.result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
    const endedAt = Date.now();
    expect(error).toBeInstanceOf(RunTimeoutError);
    expect(error).toBeInstanceOf(TimeoutError);
    expect(error).toMatchObject({ name: 'RunTimeoutError', runId: handle.id, workflow: 'order', timeoutMs: 400 });
    expect((error as Error).message).toContain(`Run "${handle.id}" of workflow "order" did not end within its timeout of 400 ms`);

    const run = await engine.client.getRun(handle.id);
    expect(run).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'RunTimeoutError' }, timeoutMs: 400, deadline: Number(waiting.deadline) });
    // It ended at about its deadline (the worker promotes due runs within its block timeout).
    expect(run!.finishedAt! - Number(waiting.deadline)).toBeGreaterThanOrEqual(0);
    expect(endedAt - Number(waiting.deadline)).toBeLessThan(1_500);
    // The failure went through the worker's final-failure path: onFailure ran once, with the timeout.
    await eventually(() => failures.length === 1);
    expect(failures[0]).toBeInstanceOf(RunTimeoutError);
    // The step completed before the wait is reported, and never ran again.
    expect(reserved).toEqual(['reserved']);
    expect((await engine.client.getRunSteps(handle.id)).find((s) => s.name === 'reserve')).toMatchObject({ status: 'succeeded', attempts: 1 });
  });

  it('aborts a step still running at the deadline: its signal aborts with the timeout and the run fails', async () => {
    const aborted = deferred<unknown>();
    let handlerSignal: AbortSignal | undefined;
    const slow = engine.registry.define('slow', { timeout: 300, maxAttempts: 3 }, async ({ step, signal }) => {
      handlerSignal = signal;
      // The step ignores its signal except to report it: the run fails anyway.
      return step.run('crunch', ({ signal: stepSignal }) => new Promise(() => stepSignal.addEventListener('abort', () => aborted.resolve(stepSignal.reason))));
    });
    await engine.worker();
    const startedAt = Date.now();
    const handle = await engine.client.start(slow, {});

    const error = await handle.result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunTimeoutError);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(300);
    expect(await aborted.promise).toBeInstanceOf(RunTimeoutError);
    expect(handlerSignal!.aborted).toBe(true);
    expect(handlerSignal!.reason).toBeInstanceOf(RunTimeoutError);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'RunTimeoutError' } });
  });

  it('a run that ends before its timeout succeeds', async () => {
    const quick = engine.registry.define('quick', { timeout: '5s' }, async ({ step }) => {
      await step.sleep('pause', 50);
      return step.run('work', () => 'done');
    });
    await engine.worker();
    const handle = await engine.client.start(quick, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('done');
    // After the 50 ms wait it was due at its timer, not at its deadline.
    expect((await runHash(handle.id)).timeout).toBe('5000');
  });

  it('the timeout given to runByName or start replaces the workflow one', async () => {
    const approval = engine.registry.define('approval', { timeout: '1h' }, ({ step }) => step.waitForSignal('await', 'approval'));
    await engine.worker();
    const byName = await engine.client.runByName('approval', {}, { timeout: 300 });
    const byStart = await engine.client.start(approval, {}, { timeout: '350ms' });
    await expect(byName.result({ timeoutMs: 5_000 })).rejects.toMatchObject({ name: 'RunTimeoutError', timeoutMs: 300 });
    await expect(byStart.result({ timeoutMs: 5_000 })).rejects.toMatchObject({ name: 'RunTimeoutError', timeoutMs: 350 });
    const hash = await runHash(byName.id);
    expect(Number(hash.deadline) - Number(hash.createdAt)).toBeGreaterThanOrEqual(300);
    expect(Number(hash.deadline) - Number(hash.createdAt)).toBeLessThan(1_300);
  });

  it('a process without the definition starts runs with the workflow timeout the workers registered, or its own', async () => {
    engine.registry.define('approval', { timeout: '2h' }, ({ step }) => step.waitForSignal('await', 'approval'));
    await engine.worker();
    const redis = connect();
    const producer = createClient({ redis, prefix: engine.prefix, registry: new WorkflowRegistry() });
    try {
      const plain = await producer.runByName('approval', {});
      const own = await producer.runByName('approval', {}, { timeout: 250 });
      expect((await runHash(plain.id)).timeout).toBe(String(2 * 3_600_000));
      expect((await runHash(own.id)).timeout).toBe('250');
      await expect(own.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunTimeoutError);
      await eventually(async () => (await runHash(plain.id)).status === 'scheduled');
      const hash = await runHash(plain.id);
      expect(Number(hash.deadline) - Number(hash.startedAt)).toBe(2 * 3_600_000);
      expect(hash.availableAt).toBe(hash.deadline);
    } finally {
      await producer.close();
      await redis.quit();
    }
  });

  it('counts from the first start: a retried run keeps its deadline and fails with the timeout, not its own error', async () => {
    const deadlines: string[] = [];
    const flaky = engine.registry.define('flaky', { timeout: 600, retries: { maxAttempts: 50, delay: 150 } }, async ({ run }) => {
      deadlines.push((await engine.redis.hget(engine.client.keys.run(run.id), 'deadline')) ?? '');
      throw new Error(`attempt ${run.attempt} failed`);
    });
    await engine.worker();
    const handle = await engine.client.start(flaky, {});
    const error = await handle.result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(RunTimeoutError);
    const run = await engine.client.getRun(handle.id);
    // Several attempts ran, all under the deadline of the first one; far fewer than 50.
    expect(run!.attempt).toBeGreaterThanOrEqual(2);
    expect(run!.attempt).toBeLessThan(10);
    expect(deadlines.length).toBeGreaterThanOrEqual(2);
    expect(new Set(deadlines).size).toBe(1);
    expect(Number(deadlines[0]) - run!.createdAt).toBeGreaterThanOrEqual(600);
    // The last retry was due at the deadline at the latest: the run ended about then.
    expect(run!.finishedAt! - Number(deadlines[0])).toBeLessThan(1_500);
  });

  it('a resumed run gets a new deadline from its next start', async () => {
    const approval = engine.registry.define('approval', { timeout: 300 }, ({ step }) => step.waitForSignal('await', 'approval'));
    await engine.worker();
    const handle = await engine.client.start(approval, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunTimeoutError);
    const first = Number((await runHash(handle.id)).deadline);

    expect(await engine.client.resume(handle.id)).toBe(true);
    await eventually(async () => (await runHash(handle.id)).status === 'scheduled');
    const second = Number((await runHash(handle.id)).deadline);
    expect(second).toBeGreaterThan(first);
    expect(await engine.client.signal(handle.id, 'approval', 'yes')).toBe(true);
    await expect(engine.client.handle(handle.id).result({ timeoutMs: 5_000 })).resolves.toBe('yes');
  });

  it("a child outlives its parent that timed out, and a resume of the parent takes the child's result without starting it again", async () => {
    const childBodies: string[] = [];
    const child = engine.registry.define('slow-child', {}, async ({ step }) => {
      await step.run('work', () => childBodies.push('work'));
      return step.waitForSignal('await-go', 'go');
    });
    const parent = engine.registry.define('parent', { timeout: 300 }, async ({ step }) => {
      const fromChild = await step.runWorkflow('child', child, {});
      return `parent got ${String(fromChild)}`;
    });
    await engine.worker({ concurrency: 4 });
    const handle = await engine.client.start(parent, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunTimeoutError);

    // The child the parent waited on is still waiting for its signal, and ends on its own.
    const steps = await engine.client.getRunSteps(handle.id);
    const childRunId = steps.find((s) => s.name === 'child')?.childRunId;
    expect(childRunId).toEqual(expect.any(String));
    expect((await engine.client.getRun(childRunId!))?.status).toBe('scheduled');
    expect(await engine.client.signal(childRunId!, 'go', 'ok')).toBe(true);
    await expect(engine.client.handle(childRunId!).result({ timeoutMs: 5_000 })).resolves.toBe('ok');

    // The resumed parent finds the child's result: one child run, its body run once.
    expect(await engine.client.resume(handle.id)).toBe(true);
    await expect(engine.client.handle(handle.id).result({ timeoutMs: 5_000 })).resolves.toBe('parent got ok');
    expect(await engine.client.countRuns({ workflow: 'slow-child' })).toBe(1);
    expect(childBodies).toEqual(['work']);
  });

  it('a rerun keeps the timeout of the run it repeats', async () => {
    const approval = engine.registry.define('approval', { timeout: '1h' }, ({ step }) => step.waitForSignal('await', 'approval'));
    await engine.worker();
    const handle = await engine.client.start(approval, {}, { timeout: 250 });
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunTimeoutError);
    const again = await engine.client.rerun(handle.id);
    await expect(again.result({ timeoutMs: 5_000 })).rejects.toMatchObject({ name: 'RunTimeoutError', timeoutMs: 250 });
  });

  it('follows workflow time: a virtual clock moved past the deadline fails a waiting run', async () => {
    const approval = engine.registry.define('approval', { timeout: '30m' }, ({ step }) => step.waitForSignal('await', 'approval'));
    await engine.worker();
    const handle = await engine.client.start(approval, {});
    await eventually(async () => (await runHash(handle.id)).status === 'scheduled');
    await engine.clock.advance('31m');
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toMatchObject({ name: 'RunTimeoutError', timeoutMs: 1_800_000 });
  });

  it.each([0, -1, NaN, 'abc', '0s'])('rejects timeout %p with a ConfigurationError naming it', async (bad) => {
    expect(() => engine.registry.define('bad', { timeout: bad as number }, () => null)).toThrow(ConfigurationError);
    expect(() => engine.registry.define('bad', { timeout: bad as number }, () => null)).toThrow(/^timeout of workflow "bad" must be a duration > 0/);
    engine.registry.define('good', {}, () => null);
    await expect(engine.client.runByName('good', {}, { timeout: bad as number })).rejects.toThrow(/^timeout of the run options must be a duration > 0/);
    expect(await engine.client.listRuns({ workflow: 'good' })).toEqual([]);
  });
});

describe('step heartbeat timeout', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  it('fails a try that stops heartbeating with StepHeartbeatTimeoutError, then the step retry succeeds', async () => {
    let tries = 0;
    let lastBeat = 0;
    const stalled = deferred<{ reason: unknown; silentMs: number }>();
    const failedTries: unknown[] = [];
    const importer = engine.registry.define('import', {}, ({ step }) =>
      step.run({ name: 'import-rows', heartbeatTimeout: 300, retries: { maxAttempts: 3, delay: 10 } }, async ({ heartbeat, signal }) => {
        tries++;
        if (tries === 1) {
          heartbeat();
          lastBeat = Date.now();
          // Hangs without heartbeating: only the heartbeat check can end this try.
          await new Promise((resolve) => signal.addEventListener('abort', resolve));
          stalled.resolve({ reason: signal.reason, silentMs: Date.now() - lastBeat });
          return 'never stored';
        }
        for (let i = 0; i < 5; i++) {
          await sleep(100);
          heartbeat();
        }
        return 'imported';
      }),
    );
    await engine.worker({ hooks: { onStepFailed: ({ error }) => void failedTries.push(error) } });
    const handle = await engine.client.start(importer, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('imported');

    const { reason, silentMs } = await stalled.promise;
    expect(reason).toBeInstanceOf(StepHeartbeatTimeoutError);
    expect(reason).toMatchObject({ step: 'import-rows', timeoutMs: 300 });
    expect(silentMs).toBeGreaterThanOrEqual(295);
    expect(silentMs).toBeLessThan(1_300);
    expect(tries).toBe(2);
    expect(failedTries).toHaveLength(1);
    expect(failedTries[0]).toBeInstanceOf(StepHeartbeatTimeoutError);
    expect((failedTries[0] as Error).message).toBe(
      'Step "import-rows" did not call heartbeat() for 300 ms (its heartbeatTimeout), so this try failed. Call heartbeat() more often than that while the step works, or raise heartbeatTimeout.',
    );
    const [record] = await engine.client.getRunSteps(handle.id);
    expect(record).toMatchObject({
      name: 'import-rows',
      status: 'succeeded',
      output: 'imported',
      attempts: 2,
      lastError: { name: 'StepHeartbeatTimeoutError' },
    });
    expect((await engine.client.getRun(handle.id))!.attempt).toBe(1);
  });

  it('a step that heartbeats regularly for longer than heartbeatTimeout succeeds in one try', async () => {
    const steady = engine.registry.define('steady', {}, ({ step }) =>
      step.run({ name: 'crunch', heartbeatTimeout: 200, retries: { maxAttempts: 2 } }, async ({ heartbeat }) => {
        const startedAt = Date.now();
        while (Date.now() - startedAt < 700) {
          await sleep(50);
          heartbeat();
        }
        return Date.now() - startedAt;
      }),
    );
    await engine.worker();
    const handle = await engine.client.start(steady, {});
    expect(await handle.result({ timeoutMs: 5_000 })).toBeGreaterThanOrEqual(700);
    const [record] = await engine.client.getRunSteps(handle.id);
    expect(record).toMatchObject({ status: 'succeeded', attempts: 1 });
    expect(record.lastError).toBeUndefined();
  });

  it('without heartbeatTimeout, heartbeat() is a no-op and a quiet step is not stopped', async () => {
    const quiet = engine.registry.define('quiet', {}, ({ step }) =>
      step.run('nap', async ({ heartbeat }) => {
        heartbeat();
        await sleep(300);
        return 'rested';
      }),
    );
    await engine.worker();
    await expect((await engine.client.start(quiet, {})).result({ timeoutMs: 5_000 })).resolves.toBe('rested');
  });

  it.each([0, -1, NaN, 'abc'])('rejects heartbeatTimeout %p: the run fails with a ConfigurationError naming the step', async (bad) => {
    let ran = false;
    const wf = engine.registry.define('bad-beat', { maxAttempts: 3 }, ({ step }: WorkflowContext) =>
      step.run({ name: 'work', heartbeatTimeout: bad as number }, () => (ran = true)),
    );
    await engine.worker();
    const error = await (await engine.client.start(wf, {})).result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toMatch(/^heartbeatTimeout of step "work" must be a duration > 0 and at most 24 days/);
    expect(ran).toBe(false);
  });
});
