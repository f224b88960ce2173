import { NonRetriableError, WorkflowRegistry, type CompensationOutcome, type WorkflowContext } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * Sagas: a step's `compensate` undoes it when the run fails for good, or is canceled with
 * `{ compensate: true }`. Compensations run in reverse order of completion, each stored once it
 * succeeds; the run is `compensating` meanwhile and ends `failed` / `canceled` with
 * `compensated: true`, or `compensation_failed` when a compensation fails after its retries.
 */
describe('sagas: compensation', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('a checkout that fails at ship after its retries compensates reserve, then charge, once each, with their outputs', async () => {
    const ran: string[] = [];
    const compensated: Array<[string, unknown]> = [];
    const seen: { status?: string; counted?: number; listed?: string[]; running?: number } = {};
    let shipTries = 0;
    const checkout = engine.registry.define('checkout', {}, async ({ step, input }: WorkflowContext<{ order: string }>) => {
      const charge = await step.run(
        {
          name: 'charge',
          compensate: (output: { chargeId: string }) => {
            compensated.push(['charge', output]);
          },
        },
        () => {
          ran.push('charge');
          return { chargeId: `ch-${input.order}` };
        },
      );
      const reservation = await step.run(
        {
          name: 'reserve',
          compensate: async (output: { reservationId: string }, ctx) => {
            compensated.push(['reserve', output]);
            // While its compensations run, the run is `compensating` in every read.
            seen.status = (await engine.client.getRun(ctx.runId))?.status;
            seen.counted = await engine.client.countRuns({ status: 'compensating' });
            seen.listed = (await engine.client.listRuns({ status: 'compensating' })).map((r) => r.id);
            // It holds a lease, but it is not counted as running.
            seen.running = await engine.client.countRuns({ status: 'running' });
          },
        },
        () => {
          ran.push('reserve');
          return { reservationId: 'r-1' };
        },
      );
      await step.run({ name: 'ship', retries: { maxAttempts: 2, delay: 10 } }, () => {
        shipTries++;
        throw new Error('the carrier is down');
      });
      return { charge, reservation };
    });
    await engine.worker();
    const handle = await engine.client.start(checkout, { order: 'o-1' });
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('the carrier is down');

    expect(ran).toEqual(['charge', 'reserve']);
    expect(shipTries).toBe(2);
    expect(compensated).toEqual([
      ['reserve', { reservationId: 'r-1' }],
      ['charge', { chargeId: 'ch-o-1' }],
    ]);
    expect(seen).toEqual({ status: 'compensating', counted: 1, listed: [handle.id], running: 0 });
    const run = await engine.client.getRun(handle.id);
    expect(run).toMatchObject({ status: 'failed', compensated: true, error: { message: 'the carrier is down' } });
    expect(run?.compensationError).toBeUndefined();
    expect(await engine.client.countRuns({ status: 'compensating' })).toBe(0);
    expect(await engine.client.countRuns({ status: 'failed' })).toBe(1);
  });

  it('a compensation that always fails leaves the run compensation_failed, with both errors readable; resume runs the compensations left', async () => {
    let refundTries = 0;
    let refundWorks = false;
    const compensated: string[] = [];
    const order = engine.registry.define('order', {}, async ({ step }) => {
      await step.run({ name: 'charge', compensate: () => void compensated.push('charge') }, () => 'charged');
      await step.run(
        {
          name: 'reserve',
          compensateRetries: { maxAttempts: 2, delay: 10 },
          compensate: () => {
            refundTries++;
            if (!refundWorks) throw new Error('the warehouse refuses the release');
            compensated.push('reserve');
          },
        },
        () => 'reserved',
      );
      throw new NonRetriableError('out of stock');
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('out of stock');
    await expect(engine.client.waitForRun(handle.id, { throwOnFailure: false })).resolves.toMatchObject({ status: 'compensation_failed' });

    const run = await engine.client.getRun(handle.id);
    expect(run).toMatchObject({
      status: 'compensation_failed',
      error: { name: 'NonRetriableError', message: 'out of stock' },
      compensationError: { message: 'the warehouse refuses the release' },
    });
    expect(run?.compensated).toBeUndefined();
    expect(refundTries).toBe(2);
    // It stopped at the failing compensation: the earlier step was not compensated.
    expect(compensated).toEqual([]);
    expect(await engine.client.countRuns({ status: 'compensation_failed' })).toBe(1);

    // A person fixes the cause and resumes: the compensations left run, in order, and the run ends failed.
    refundWorks = true;
    expect(await engine.client.resume(handle.id)).toBe(true);
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'failed');
    expect(compensated).toEqual(['reserve', 'charge']);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', compensated: true, error: { message: 'out of stock' } });
    expect(await engine.client.countRuns({ status: 'compensation_failed' })).toBe(0);
  });

  it('cancelRun(id, { compensate: true }) on a waiting run compensates it, and it ends canceled', async () => {
    const compensated: unknown[] = [];
    const waiting = deferred();
    const order = engine.registry.define('order', {}, async ({ step }) => {
      await step.run({ name: 'charge', compensate: (output) => void compensated.push(output) }, () => ({ amount: 42 }));
      waiting.resolve();
      await step.waitForSignal('approval', 'approved');
      await step.run('ship', () => 'shipped');
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await waiting.promise;
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');

    expect(await engine.client.cancelRun(handle.id, { compensate: true, reason: 'customer changed their mind' })).toBe(true);
    const outcome = await engine.client.waitForRun(handle.id, { throwOnFailure: false, timeoutMs: 10_000 });
    expect(outcome).toMatchObject({ status: 'canceled' });
    expect(compensated).toEqual([{ amount: 42 }]);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'canceled', compensated: true, cancelReason: 'customer changed their mind' });
    // A signal for the canceled run is refused: it ended.
    expect(await engine.client.signal(handle.id, 'approved')).toBe(false);
  });

  it('cancelRun without compensate cancels at once and compensates nothing', async () => {
    const compensated: unknown[] = [];
    const waiting = deferred();
    const order = engine.registry.define('order', {}, async ({ step }) => {
      await step.run({ name: 'charge', compensate: (output) => void compensated.push(output) }, () => 1);
      waiting.resolve();
      await step.waitForSignal('approval', 'approved');
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await waiting.promise;
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
    expect(await engine.client.cancelRun(handle.id)).toBe(true);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'canceled' });
    expect((await engine.client.getRun(handle.id))?.compensated).toBeUndefined();
    expect(compensated).toEqual([]);
  });

  it('a step completed before step.commit is never compensated; one completed after it is', async () => {
    const compensated: string[] = [];
    const order = engine.registry.define('order', {}, async ({ step }) => {
      await step.run({ name: 'charge', compensate: () => void compensated.push('charge') }, () => 'charged');
      await step.commit('paid');
      await step.run({ name: 'reserve', compensate: () => void compensated.push('reserve') }, () => 'reserved');
      throw new NonRetriableError('out of stock');
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('out of stock');
    await eventually(async () => (await engine.client.getRun(handle.id))?.compensated === true);
    expect(compensated).toEqual(['reserve']);
    expect((await engine.client.getRunSteps(handle.id)).map((s) => [s.name, s.status])).toEqual([
      ['charge', 'succeeded'],
      ['paid', 'succeeded'],
      ['reserve', 'succeeded'],
    ]);
  });

  it('steps completed in parallel branches are compensated in reverse order of completion', async () => {
    const compensated: string[] = [];
    const bDone = deferred();
    const order = engine.registry.define('order', {}, async ({ step }) => {
      await Promise.all([
        // a completes after b: a is compensated first.
        step.run({ name: 'a', compensate: () => void compensated.push('a') }, async () => {
          await bDone.promise;
          await new Promise((r) => setTimeout(r, 20));
          return 'a';
        }),
        step.run({ name: 'b', compensate: () => void compensated.push('b') }, () => {
          bDone.resolve();
          return 'b';
        }),
      ]);
      await step.run({ name: 'c', compensate: () => void compensated.push('c') }, () => 'c');
      throw new NonRetriableError('fails after the branches');
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('fails after the branches');
    await eventually(async () => (await engine.client.getRun(handle.id))?.compensated === true);
    expect(compensated).toEqual(['c', 'a', 'b']);
  });

  it('a failed step is not compensated, and a retried run compensates only once it fails for good', async () => {
    const compensated: string[] = [];
    const order = engine.registry.define('order', { retries: { maxAttempts: 2, delay: 10 } }, async ({ step }) => {
      await step.run({ name: 'charge', compensate: () => void compensated.push('charge') }, () => 'charged');
      await step.run({ name: 'reserve', compensate: () => void compensated.push('reserve') }, () => {
        throw new Error('no stock');
      });
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toThrow('no stock');
    await eventually(async () => (await engine.client.getRun(handle.id))?.compensated === true);
    // Compensated once, after the second (last) attempt failed: not after the first.
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', attempt: 2, compensated: true });
    expect(compensated).toEqual(['charge']);
  });

  it('onFailure runs after the compensations and sees how they went', async () => {
    const order: string[] = [];
    const hook = deferred<CompensationOutcome | undefined>();
    const checkout = engine.registry.define(
      'checkout',
      {
        onFailure: ({ compensation }) => {
          order.push('onFailure');
          hook.resolve(compensation);
        },
      },
      async ({ step }) => {
        await step.run({ name: 'charge', compensate: () => void order.push('refund') }, () => 1);
        throw new NonRetriableError('declined later');
      },
    );
    await engine.worker();
    await engine.client.start(checkout, {});
    await expect(hook.promise).resolves.toEqual({ status: 'compensated', steps: ['charge'] });
    expect(order).toEqual(['refund', 'onFailure']);
  });

  it('the event stream tells run.compensating, then run.failed; and run.compensation_failed when a compensation fails', async () => {
    const stream = engine.client.events({ from: '0' });
    try {
      const order = engine.registry.define('order', {}, async ({ step, input }: WorkflowContext<{ refundFails: boolean }>) => {
        await step.run(
          {
            name: 'charge',
            compensateRetries: { maxAttempts: 1 },
            compensate: () => {
              if (input.refundFails) throw new Error('refund refused');
            },
          },
          () => 1,
        );
        throw new NonRetriableError('declined');
      });
      await engine.worker();
      const undone = await engine.client.start(order, { refundFails: false });
      const stuck = await engine.client.start(order, { refundFails: true });
      const seen: Array<{ runId: string; type: string; error?: string }> = [];
      for await (const event of stream) {
        if (event.type.startsWith('run.') && event.type !== 'run.created' && event.type !== 'run.started')
          seen.push({ runId: event.runId, type: event.type, error: event.error });
        if (seen.filter((e) => ['run.failed', 'run.compensation_failed'].includes(e.type)).length === 2) break;
      }
      expect(seen.filter((e) => e.runId === undone.id)).toEqual([
        { runId: undone.id, type: 'run.compensating', error: 'declined' },
        { runId: undone.id, type: 'run.failed', error: 'declined' },
      ]);
      expect(seen.filter((e) => e.runId === stuck.id)).toEqual([
        { runId: stuck.id, type: 'run.compensating', error: 'declined' },
        { runId: stuck.id, type: 'run.compensation_failed', error: 'declined' },
      ]);
    } finally {
      await stream.close();
    }
  });

  it('a compensating run claimed by a worker that lacks its workflow ends compensation_failed, never failed as if compensated; resume on a worker that has it compensates', async () => {
    const compensated: unknown[] = [];
    const waiting = deferred();
    const order = engine.registry.define('order', {}, async ({ step }) => {
      await step.run({ name: 'charge', compensate: (output) => void compensated.push(output) }, () => 'ch-1');
      waiting.resolve();
      await step.waitForSignal('approval', 'approved');
    });
    const first = await engine.worker();
    const handle = await engine.client.start(order, {});
    await waiting.promise;
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
    await first.stop();

    const stranger = await engine.worker({ app: 'stranger', registry: new WorkflowRegistry(), queues: ['default'] });
    expect(await engine.client.cancelRun(handle.id, { compensate: true })).toBe(true);
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'compensation_failed');
    expect(await engine.client.getRun(handle.id)).toMatchObject({
      status: 'compensation_failed',
      error: { name: 'CanceledError' },
      compensationError: { name: 'UnknownWorkflowError' },
    });
    expect(compensated).toEqual([]);
    await stranger.stop();

    await engine.worker();
    expect(await engine.client.resume(handle.id)).toBe(true);
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'canceled');
    expect(compensated).toEqual(['ch-1']);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'canceled', compensated: true });
  });

  it('a run timeout during a long wait fails the run with RunTimeoutError, and its compensations run', async () => {
    const compensated: unknown[] = [];
    const order = engine.registry.define('order', { timeout: 300 }, async ({ step }) => {
      await step.run({ name: 'charge', compensate: (output) => void compensated.push(output) }, () => ({ chargeId: 'ch-9' }));
      await step.waitForSignal('approval', 'approved');
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ name: 'RunTimeoutError' });
    await eventually(async () => (await engine.client.getRun(handle.id))?.compensated === true);
    expect(compensated).toEqual([{ chargeId: 'ch-9' }]);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', compensated: true, error: { name: 'RunTimeoutError' } });
  });

  it('a run timeout while a step runs aborts the step, and the compensations of the completed steps run', async () => {
    const compensated: string[] = [];
    const order = engine.registry.define('order', { timeout: 300 }, async ({ step }) => {
      await step.run({ name: 'charge', compensate: () => void compensated.push('charge') }, () => 'charged');
      await step.run('slow', ({ signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason))));
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await expect(handle.result({ timeoutMs: 10_000 })).rejects.toMatchObject({ name: 'RunTimeoutError' });
    await eventually(async () => (await engine.client.getRun(handle.id))?.compensated === true);
    expect(compensated).toEqual(['charge']);
  });

  it('rejects a compensate option that is not a function, naming the step', async () => {
    const order = engine.registry.define('order', {}, async ({ step }) => {
      await step.run({ name: 'charge', compensate: 'refund' as never }, () => 1);
    });
    await engine.worker();
    const handle = await engine.client.start(order, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('The compensate option of step "charge" must be a function');
  });
});
