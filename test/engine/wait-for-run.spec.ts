import { Cluster } from 'ioredis';

import {
  CanceledError,
  ClientClosedError,
  createClient,
  NonRetriableError,
  RunNotFoundError,
  TimeoutError,
  type RedisConnection,
  type WorkflowClient,
  type WorkflowContext,
} from '../../lib';
import { clusterMode, connect, countScriptCalls, deferred, eventually, TestEngine } from '../support/engine';

/**
 * `handle.result()` and `client.waitForRun`: no polling. A waiter reads the run once, then wakes
 * on the run's end message (end_run publishes it with the result); after its subscriber
 * reconnects, it reads the runs it waits on again, in one round trip.
 */
describe('waiting for a run', () => {
  let engine: TestEngine;
  const extra: Array<{ client: WorkflowClient; redis: RedisConnection }> = [];
  beforeEach(() => (engine = new TestEngine()));
  afterEach(async () => {
    for (const { client, redis } of extra.splice(0)) {
      await client.close();
      await redis.quit();
    }
    await engine.close();
  });

  /** A second client on the engine's prefix, on a connection of its own (to count what it sends). */
  const waitingClient = async () => {
    const redis = connect();
    const client = createClient({ redis, prefix: engine.prefix, registry: engine.registry });
    extra.push({ client, redis });
    await client.ready();
    return { client, redis };
  };

  it('resolves with the output, and with throwOnFailure: false with each final state', async () => {
    const gate = deferred();
    const wf = engine.define('outcomes', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ mode: string }>) => {
      await step.run('gate', () => gate.promise);
      if (input.mode === 'fail') throw new NonRetriableError('no stock');
      return { mode: input.mode };
    });
    await engine.worker();
    const ok = await engine.client.start(wf, { mode: 'ok' });
    const failing = await engine.client.start(wf, { mode: 'fail' });
    const canceled = await engine.client.start(wf, { mode: 'cancel' });
    const waits = [
      ok.result({ timeoutMs: 5_000 }),
      engine.client.waitForRun(ok.id, { timeoutMs: 5_000, throwOnFailure: false }),
      engine.client.waitForRun(failing.id, { timeoutMs: 5_000 }).catch((error: unknown) => error),
      engine.client.waitForRun(failing.id, { timeoutMs: 5_000, throwOnFailure: false }),
      engine.client.waitForRun(canceled.id, { throwOnFailure: false }),
      canceled.result().catch((error: unknown) => error),
    ];
    await eventually(async () => (await engine.client.getRun(canceled.id))?.status === 'running');
    await engine.client.cancelRun(canceled.id, { reason: 'customer changed their mind' });
    gate.resolve();
    const [output, okState, failure, failState, cancelState, cancelError] = await Promise.all(waits);
    expect(output).toEqual({ mode: 'ok' });
    expect(okState).toEqual({ runId: ok.id, status: 'succeeded', output: { mode: 'ok' } });
    expect(failure).toBeInstanceOf(NonRetriableError);
    expect((failure as Error).message).toBe('no stock');
    expect(failState).toEqual({ runId: failing.id, status: 'failed', error: expect.objectContaining({ message: 'no stock' }) });
    expect(cancelState).toEqual({ runId: canceled.id, status: 'canceled', error: expect.any(CanceledError), reason: 'customer changed their mind' });
    expect(cancelError).toBeInstanceOf(CanceledError);
    expect((cancelError as CanceledError).reason).toBe('customer changed their mind');
    // A run that already ended answers from the one read.
    await expect(engine.client.waitForRun(ok.id)).resolves.toEqual({ mode: 'ok' });
  });

  it('an output too large for the end message is read once more', async () => {
    const big = 'x'.repeat(100_000);
    const gate = deferred();
    const wf = engine.define('big-output', {}, async ({ step }) => {
      await step.run('gate', () => gate.promise);
      return big;
    });
    await engine.worker();
    const handle = await engine.client.start(wf, {});
    const waiting = handle.result({ timeoutMs: 5_000 });
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'running');
    gate.resolve();
    expect(await waiting).toBe(big);
  });

  it('rejects with the abort reason, with TimeoutError at the deadline, and with RunNotFoundError for an unknown id', async () => {
    const wf = engine.define('forever', {}, async ({ step }) => step.waitForSignal('never', 'never'));
    const handle = await engine.client.start(wf, {});
    const controller = new AbortController();
    const aborted = engine.client.waitForRun(handle.id, { signal: controller.signal }).catch((error: unknown) => error);
    controller.abort(new Error('user left the page'));
    expect(await aborted).toEqual(new Error('user left the page'));
    const viaHandle = new AbortController();
    const handleWait = handle.result({ signal: viaHandle.signal }).catch((error: unknown) => error);
    viaHandle.abort(new Error('gone'));
    expect(await handleWait).toEqual(new Error('gone'));
    const already = AbortSignal.abort();
    await expect(engine.client.waitForRun(handle.id, { signal: already })).rejects.toMatchObject({ name: 'AbortError' });

    const started = Date.now();
    await expect(handle.result({ timeoutMs: 200 })).rejects.toBeInstanceOf(TimeoutError);
    expect(Date.now() - started).toBeLessThan(2_000);
    await expect(engine.client.waitForRun('no-such-run', { timeoutMs: 1_000 })).rejects.toBeInstanceOf(RunNotFoundError);
    await expect(engine.client.waitForRun(handle.id, { timeoutMs: -1 })).rejects.toThrow(/timeoutMs/);
    await expect(engine.client.waitForRun(handle.id, { signal: 'x' as unknown as AbortSignal })).rejects.toThrow(/AbortSignal/);
    await expect(engine.client.waitForRun(handle.id, { timout: 5 } as never)).rejects.toThrow(/timout/);
  });

  it('result() on 100 slow runs reads each run once: no polling', async () => {
    const release = deferred();
    const wf = engine.define('slow', { maxConcurrency: Infinity }, async ({ step, input }: WorkflowContext<{ n: number }>) => {
      await step.run('work', () => release.promise);
      return input.n * 2;
    });
    await engine.worker({ concurrency: 100 });
    const { client, redis } = await waitingClient();
    const handles = await Promise.all(Array.from({ length: 100 }, (_, n) => engine.client.start(wf, { n })));
    await eventually(async () => (await engine.client.countRuns({ workflow: 'slow', status: 'running' })) === 100, 10_000);

    const sent = countScriptCalls(redis);
    const results = Promise.all(handles.map((h) => client.handle<number>(h.id).result({ timeoutMs: 20_000 })));
    // The runs stay running a while: a poller would read each of them again and again.
    await new Promise((r) => setTimeout(r, 500));
    release.resolve();
    expect(await results).toEqual(handles.map((_, n) => n * 2));
    expect(sent).toEqual({ hmget: 100 });
  });

  it('a run that ends while the waiter is disconnected is read after the reconnect', async () => {
    const wf = engine.define('parked', {}, async ({ step }) => step.waitForSignal('never', 'never'));
    const handle = await engine.client.start(wf, {});
    const { client } = await waitingClient();
    const waiting = client.waitForRun(handle.id, { throwOnFailure: false, timeoutMs: 10_000 });
    // Subscribed and read once: the run has not ended.
    await new Promise((r) => setTimeout(r, 200));
    // Cut every subscriber's connection, and cancel the run before they are back: its end
    // message reaches no one.
    const nodes = engine.redis instanceof Cluster ? engine.redis.nodes('master') : [engine.redis];
    await Promise.all(nodes.map((node) => node.call('CLIENT', 'KILL', 'TYPE', 'pubsub')));
    await engine.client.cancelRun(handle.id, { reason: 'while away' });
    const started = Date.now();
    expect(await waiting).toEqual({ runId: handle.id, status: 'canceled', error: expect.any(CanceledError), reason: 'while away' });
    // Woken by the read after the reconnect, not by the 15 s safety sweep.
    expect(Date.now() - started).toBeLessThan(5_000);
  });

  it('closing the client ends its waits with ClientClosedError', async () => {
    const wf = engine.define('idle', {}, async ({ step }) => step.waitForSignal('never', 'never'));
    const handle = await engine.client.start(wf, {});
    const { client } = await waitingClient();
    const waiting = client.waitForRun(handle.id).catch((error: unknown) => error);
    await new Promise((r) => setTimeout(r, 100));
    await client.close();
    const error = await waiting;
    expect(error).toBeInstanceOf(ClientClosedError);
    expect((error as Error).message).toBe(
      `Waiting for the result of run "${handle.id}" stopped: its client was closed. Close the client only after the waits you need are over, or wait with a client that stays open.`,
    );
    await expect(client.waitForRun(handle.id)).rejects.toBeInstanceOf(ClientClosedError);
  });

  it(`works on ${clusterMode ? 'the cluster' : 'standalone Redis'} for many waiters of one run`, async () => {
    const wf = engine.define('shared', {}, () => 'same');
    const handle = await engine.client.start(wf, {});
    const waits = Array.from({ length: 20 }, () => handle.result({ timeoutMs: 5_000 }));
    await engine.worker();
    expect(await Promise.all(waits)).toEqual(Array.from({ length: 20 }, () => 'same'));
  });
});
