import { ConfigurationError, createSchedules, type WorkflowContext } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

/**
 * Run priorities: a higher `priority` is claimed first within a queue, FIFO within a priority,
 * and each level counts as one minute of waiting, so a run is passed only by runs of priority
 * p + n that became ready less than n minutes after it (ready.lua, claim.lua).
 */
describe('priorities', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  /** A workflow that records the order its runs start in. */
  function recorder(name: string, options: Parameters<TestEngine['define']>[1] = {}) {
    const order: string[] = [];
    const wf = engine.define(name, options, async ({ input }: WorkflowContext<{ tag: string }>) => {
      order.push(input.tag);
      return input.tag;
    });
    return { wf, order };
  }

  it('claims three levels highest first, FIFO within each, whether started one by one or in bulk', async () => {
    const { wf, order } = recorder('levels');
    const expected: Record<number, string[]> = { [-5]: [], 0: [], 7: [] };
    const levels = [0, 7, -5, 7, 0, -5, 0, 7, -5];
    // One by one, then the same levels again in one runMany call (one script, the same `now`).
    for (const [i, priority] of levels.entries()) {
      const tag = `single-${i}-p${priority}`;
      expected[priority].push(tag);
      await engine.client.start(wf, { tag }, { priority });
    }
    const bulk = levels.map((priority, i) => ({ input: { tag: `bulk-${i}-p${priority}` }, options: { priority } }));
    for (const item of bulk) expected[item.options.priority].push(item.input.tag);
    await engine.client.runManyByName(wf.name, bulk);
    // The depth counts the priority runs, not the list's mark.
    expect((await engine.client.getQueueStats({ queues: [wf.queue] }))[0]).toMatchObject({ queued: 18 });

    await engine.worker({ concurrency: 1 });
    await eventually(() => order.length === levels.length * 2, 10_000);
    expect(order).toEqual([...expected[7], ...expected[0], ...expected[-5]]);
  });

  it('ages: a run is passed by higher priorities only within their head start of one minute per level', async () => {
    const { wf, order } = recorder('aging');
    await engine.client.start(wf, { tag: 'old p0' });
    await engine.clock.advance('2m');
    // Two minutes later: p1 (one minute ahead) does not pass it; p3 (three minutes ahead) does.
    await engine.client.start(wf, { tag: 'new p1' }, { priority: 1 });
    await engine.client.start(wf, { tag: 'new p3' }, { priority: 3 });
    await engine.client.start(wf, { tag: 'new p0' });
    await engine.worker({ concurrency: 1 });
    await eventually(() => order.length === 4, 10_000);
    expect(order).toEqual(['new p3', 'old p0', 'new p1', 'new p0']);
  });

  it("takes a workflow's default priority, which a start replaces, and reaches runs started by name, children and retries", async () => {
    const { wf: urgent, order } = recorder('urgent', { priority: 10 });
    const plain = engine.define('plain', {}, async ({ input }: WorkflowContext<{ tag: string }>) => {
      order.push(input.tag);
    });
    await engine.client.start(plain, { tag: 'plain' });
    await engine.client.runByName('urgent', { tag: 'urgent by name' });
    await engine.client.start(urgent, { tag: 'urgent lowered' }, { priority: -1 });
    await engine.worker({ concurrency: 1 });
    await eventually(() => order.length === 3, 10_000);
    expect(order).toEqual(['urgent by name', 'plain', 'urgent lowered']);
  });

  it("a schedule's runs take its priority, or else the workflow's", async () => {
    const { wf, order } = recorder('report', { priority: 2 });
    // A worker registers the workflow (with its priority), then stops: the runs below wait queued.
    await (await engine.worker()).stop();
    await engine.client.schedule('hourly', { workflow: wf.name, cron: '0 * * * *', input: { tag: 'scheduled p9' }, priority: 9 });
    await engine.client.schedule('daily', { workflow: wf.name, cron: '0 0 * * *', input: { tag: 'scheduled, workflow p2' } });
    await engine.client.start(wf, { tag: 'started p5' }, { priority: 5 });
    const schedules = createSchedules(engine.client);
    await schedules.trigger('daily');
    await schedules.trigger('hourly');
    await engine.worker({ concurrency: 1 });
    await eventually(() => order.length === 3, 10_000);
    expect(order).toEqual(['scheduled p9', 'started p5', 'scheduled, workflow p2']);
    await expect(engine.client.schedule('bad', { workflow: wf.name, every: '1m', priority: 2000 })).rejects.toThrow(
      'priority of schedule "bad" must be an integer from -1000 to 1000, got 2000.',
    );
  });

  it('a child run and a retried run keep their priority', async () => {
    const order: string[] = [];
    let failures = 0;
    const child = engine.define('prio-child', {}, async ({ input }: WorkflowContext<{ tag: string }>) => {
      order.push(input.tag);
    });
    const flaky = engine.define('prio-flaky', { priority: 5, maxAttempts: 2, retries: { delay: '1s' } }, async () => {
      order.push(`flaky try ${++failures}`);
      if (failures === 1) throw new Error('first try fails');
    });
    const parent = engine.define('prio-parent', {}, async ({ step }) => {
      await step.emitWorkflow({ name: 'low child', priority: -3 }, child, { tag: 'child p-3' });
      await step.emitWorkflow({ name: 'high child', priority: 4 }, child, { tag: 'child p4' });
    });
    // The parent starts both children; the worker starts them in priority order.
    await engine.client.start(parent, {});
    const worker = await engine.worker({ concurrency: 1 });
    await eventually(() => order.length === 2, 10_000);
    expect(order).toEqual(['child p4', 'child p-3']);
    await worker.stop();

    // A retry, due after its delay, is promoted into the priority zset: it passes a plain run.
    const handle = await engine.client.start(flaky, {});
    const retrying = await engine.worker({ concurrency: 1 });
    await eventually(async () => order.length === 3 && (await engine.client.getRun(handle.id))?.status === 'scheduled', 10_000);
    await retrying.stop();
    await engine.client.start(child, { tag: 'plain before the retry is due' });
    await engine.clock.advance('1s');
    await expect(engine.client.scripts.promote(flaky.queue, engine.clock.now(), 100)).resolves.toMatchObject({ moved: 1 });
    await engine.worker({ concurrency: 1 });
    await eventually(() => order.length === 5, 10_000);
    expect(order.slice(2)).toEqual(['flaky try 1', 'flaky try 2', 'plain before the retry is due']);
  });

  it('names a bad priority, and refuses one on a keyed concurrency limit', async () => {
    const { wf } = recorder('bad');
    await expect(engine.client.start(wf, { tag: 'x' }, { priority: 1.5 })).rejects.toThrow(ConfigurationError);
    await expect(engine.client.start(wf, { tag: 'x' }, { priority: 1001 })).rejects.toThrow(
      'priority of the run options must be an integer from -1000 to 1000, got 1001.',
    );
    expect(() => engine.define('both', { priority: 2, concurrency: { key: 'k', limit: 1 } }, async () => null)).toThrow(
      /sets both concurrency .* and priority/,
    );
    const keyed = engine.define('keyed', { concurrency: { key: 'k', limit: 1 } }, async () => null);
    await expect(engine.client.start(keyed, {}, { priority: 2 })).rejects.toThrow(/has a keyed concurrency limit/);
    expect(await engine.client.countRuns({})).toBe(0);
  });
});
