import { createQueues, type WorkflowContext, type WorkflowQueues } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/**
 * Pausing a queue: no worker claims its runs (neither a claim nor the claim that rides on a
 * finish), the run that is running goes on, new runs queue, and the pause, kept in Redis, holds
 * across a worker's restart until `resume`.
 */
describe('queue pause and resume', () => {
  let engine: TestEngine;
  let queues: WorkflowQueues;
  beforeEach(() => {
    engine = new TestEngine();
    queues = createQueues(engine.client);
  });
  afterEach(() => engine.close());

  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;

  it('holds the queued runs while the running one finishes, across a restart, until resume', async () => {
    const gate = deferred();
    let started = 0;
    const slow = engine.define('slow', {}, async ({ input }: WorkflowContext<{ n: number }>) => {
      started++;
      if (input.n === 1) await gate.promise;
      return input.n;
    });
    const other = engine.define('other', { queue: 'other' }, async () => 'other ran');
    const worker = await engine.worker({ concurrency: 1, queues: ['default', 'other'] });
    const first = await engine.client.start(slow, { n: 1 });
    await eventually(async () => (await statusOf(first.id)) === 'running');

    expect(await queues.pause('default', { note: 'db migration' })).toBe(true);
    expect(await queues.pause('default')).toBe(false); // paused already: the first note stays
    const second = await engine.client.start(slow, { n: 2 });
    gate.resolve();
    await expect(first.result({ timeout: '5s' })).resolves.toBe(1);
    // The finish of the first run claims no next run of the paused queue, and the queue loop none either:
    // a run of an unpaused queue, started after, is claimed and ends while the second waits.
    await expect((await engine.client.start(other, {})).result({ timeout: '5s' })).resolves.toBe('other ran');
    expect(await statusOf(second.id)).toBe('queued');
    expect(started).toBe(1);
    const [stats] = await engine.client.getQueueStats({ queues: ['default'] });
    expect(stats).toMatchObject({ queue: 'default', queued: 1, paused: { note: 'db migration', at: expect.any(Number) } });
    expect(await queues.paused()).toEqual({ default: { note: 'db migration', at: expect.any(Number) } });

    // A restart: the pause is in Redis, not in the worker.
    await worker.stop();
    await engine.worker({ concurrency: 1, queues: ['default', 'other'] });
    await expect((await engine.client.start(other, {})).result({ timeout: '5s' })).resolves.toBe('other ran');
    expect(await statusOf(second.id)).toBe('queued');

    expect(await queues.resume('default')).toBe(true);
    expect(await queues.resume('default')).toBe(false);
    await expect(second.result({ timeout: '5s' })).resolves.toBe(2);
    expect((await engine.client.getQueueStats({ queues: ['default'] }))[0].paused).toBeUndefined();
  });

  it("pauses the lists of the queue's versions too, and refuses a queue name that is not one", async () => {
    const v2 = engine.define('versioned', { version: 2 }, async () => 'v2 ran');
    await queues.pause('default');
    await engine.worker();
    const run = await engine.client.start(v2, {});
    const other = engine.define('other', { queue: 'other' }, async () => 'other ran');
    await engine.worker({ queues: ['other'] });
    await expect((await engine.client.start(other, {})).result({ timeout: '5s' })).resolves.toBe('other ran');
    expect(await statusOf(run.id)).toBe('queued');
    await queues.resume('default');
    await expect(run.result({ timeout: '5s' })).resolves.toBe('v2 ran');
    await expect(queues.pause('bad queue')).rejects.toThrow('The queue to pause');
  });
});
