import { ConfigurationError, type RunState, type RunSummary, type WaitingFilter } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

/**
 * A run suspended in a step says what it waits for (`waitingFor` on getRun, listRuns and
 * listRunSummaries) and can be found by it (`waiting` of listRuns, listRunSummaries and
 * countRuns), from the run's `wait` field and the `waiting:` indexes the scripts keep with it.
 */
describe('waiting runs: what a scheduled run waits for, shown and filtered on', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  /** Starts one run per kind of wait (and a delayed run that waits for nothing) and waits until each is suspended. */
  async function startWaitingRuns() {
    const child = engine.registry.define('sub', {}, async ({ step }) => step.waitForSignal('go', 'go'));
    const bySignal = engine.registry.define('by-signal', {}, async ({ step }) => step.waitForSignal('approval', 'approve', { timeout: '1h' }));
    const byOtherSignal = engine.registry.define('by-other-signal', {}, async ({ step }) => step.waitForSignal('rejection', 'reject'));
    const byEvent = engine.registry.define('by-event', {}, async ({ step }) => step.waitForEvent('payment', 'order.paid', { match: { orderId: 'o-1' } }));
    const byChild = engine.registry.define('by-child', {}, async ({ step }) => step.runWorkflow('child', child, {}));
    const bySleep = engine.registry.define('by-sleep', {}, async ({ step }) => step.sleep('nap', '1h'));
    const byRace = engine.registry.define('by-race', {}, async ({ step }) =>
      step.waitForAny('decision', { approved: step.signal('approve'), timeout: step.timer('1h') }),
    );
    const delayed = engine.registry.define('delayed', {}, async () => 'late');
    await engine.worker({ concurrency: 8 });
    const before = Date.now();
    const h = {
      signal: await engine.client.start(bySignal, {}),
      otherSignal: await engine.client.start(byOtherSignal, {}),
      event: await engine.client.start(byEvent, {}),
      child: await engine.client.start(byChild, {}),
      sleep: await engine.client.start(bySleep, {}),
      race: await engine.client.start(byRace, {}),
      delayed: await engine.client.start(delayed, {}, { runAt: Date.now() + 3_600_000 }),
    };
    const childId = `${h.child.id}.child`;
    const waiting = [h.signal, h.otherSignal, h.event, h.child, h.sleep, h.race].map((r) => r.id).concat(childId);
    await eventually(async () => (await Promise.all(waiting.map((id) => engine.client.getRun(id)))).every((r) => r?.waitingFor !== undefined));
    return { h, childId, before };
  }

  const ids = (rows: Array<RunState | RunSummary>) => rows.map((r) => r.id).sort();

  it('getRun, listRuns and listRunSummaries say what each run waits for; a delayed run waits for nothing', async () => {
    const { h, childId, before } = await startWaitingRuns();
    const get = async (id: string) => (await engine.client.getRun(id))!;

    const signal = await get(h.signal.id);
    expect(signal.status).toBe('scheduled');
    expect(signal.waitingFor).toEqual({ kind: 'signal', name: 'approve', until: expect.any(Number) });
    expect(signal.waitingFor!.until! - before).toBeGreaterThanOrEqual(3_600_000);
    expect((await get(h.otherSignal.id)).waitingFor).toEqual({ kind: 'signal', name: 'reject' });
    expect((await get(h.event.id)).waitingFor).toEqual({ kind: 'event', name: 'order.paid' });
    expect((await get(h.child.id)).waitingFor).toEqual({ kind: 'child', name: childId });
    expect((await get(childId)).waitingFor).toEqual({ kind: 'signal', name: 'go' });
    const sleep = await get(h.sleep.id);
    expect(sleep.waitingFor).toEqual({ kind: 'sleep', until: expect.any(Number) });
    expect(sleep.waitingFor!.until! - before).toBeGreaterThanOrEqual(3_600_000);
    expect((await get(h.race.id)).waitingFor).toEqual({ kind: 'any', until: expect.any(Number) });
    const delayed = await get(h.delayed.id);
    expect(delayed.status).toBe('scheduled');
    expect(delayed.waitingFor).toBeUndefined();

    const summaries = await engine.client.listRunSummaries({ status: 'scheduled', limit: 100 });
    const byId = new Map(summaries.map((s) => [s.id, s]));
    expect(byId.get(h.signal.id)!.waitingFor).toEqual(signal.waitingFor);
    expect(byId.get(h.event.id)!.waitingFor).toEqual({ kind: 'event', name: 'order.paid' });
    expect(byId.get(h.child.id)!.waitingFor).toEqual({ kind: 'child', name: childId });
    expect(byId.get(h.sleep.id)!.waitingFor).toEqual(sleep.waitingFor);
    expect(byId.get(h.delayed.id)!.waitingFor).toBeUndefined();
    const runs = await engine.client.listRuns({ workflow: 'by-event', limit: 10 });
    expect(runs.map((r) => r.waitingFor)).toEqual([{ kind: 'event', name: 'order.paid' }]);
  });

  it('the waiting filter finds exactly the runs waiting so, in lists and counts, alone or with a workflow', async () => {
    const { h, childId } = await startWaitingRuns();
    const expected: Array<[WaitingFilter, string[]]> = [
      ['signal', [h.signal.id, h.otherSignal.id, childId]],
      ['signal:approve', [h.signal.id]],
      ['signal:reject', [h.otherSignal.id]],
      ['signal:nobody', []],
      ['event', [h.event.id]],
      ['event:order.paid', [h.event.id]],
      ['event:order.shipped', []],
      ['child', [h.child.id]],
      ['sleep', [h.sleep.id]],
      ['any', [h.race.id]],
    ];
    for (const [waiting, want] of expected) {
      expect([waiting, ids(await engine.client.listRuns({ waiting }))]).toEqual([waiting, [...want].sort()]);
      expect([waiting, ids(await engine.client.listRunSummaries({ waiting, status: 'scheduled' }))]).toEqual([waiting, [...want].sort()]);
      expect([waiting, await engine.client.countRuns({ waiting })]).toEqual([waiting, want.length]);
    }
    // With a workflow: only its runs.
    expect(ids(await engine.client.listRunSummaries({ waiting: 'signal', workflow: 'sub' }))).toEqual([childId]);
    expect(await engine.client.countRuns({ waiting: 'signal', workflow: 'by-signal' })).toBe(1);
    expect(await engine.client.countRuns({ waiting: 'signal', workflow: 'by-event' })).toBe(0);
    // Pages: newest first, by limit and offset.
    const page1 = await engine.client.listRunSummaries({ waiting: 'signal', limit: 2 });
    const page2 = await engine.client.listRunSummaries({ waiting: 'signal', limit: 2, offset: 2 });
    expect(ids([...page1, ...page2])).toEqual([h.signal.id, h.otherSignal.id, childId].sort());
    expect(page1[0].createdAt).toBeGreaterThanOrEqual(page1[1].createdAt!);
  });

  it('a run no longer matches once its signal came, its event came, its child ended or it was canceled', async () => {
    const { h, childId } = await startWaitingRuns();
    await engine.client.signal(h.signal.id, 'approve', { ok: true });
    await expect(h.signal.result({ timeoutMs: 5_000 })).resolves.toEqual({ ok: true });
    expect(ids(await engine.client.listRuns({ waiting: 'signal:approve' }))).toEqual([]);
    expect(await engine.client.countRuns({ waiting: 'signal:approve' })).toBe(0);
    expect(await engine.client.countRuns({ waiting: 'signal' })).toBe(2);
    expect((await engine.client.getRun(h.signal.id))!.waitingFor).toBeUndefined();

    await engine.client.emitEvent('order.paid', { orderId: 'o-1' });
    await h.event.result({ timeoutMs: 5_000 });
    expect(await engine.client.countRuns({ waiting: 'event' })).toBe(0);

    await engine.client.signal(childId, 'go', 'went');
    await expect(h.child.result({ timeoutMs: 5_000 })).resolves.toBe('went');
    expect(await engine.client.countRuns({ waiting: 'child' })).toBe(0);
    expect(ids(await engine.client.listRuns({ waiting: 'signal' }))).toEqual([h.otherSignal.id]);

    for (const run of [h.otherSignal, h.sleep, h.race]) await engine.client.cancelRun(run.id);
    for (const waiting of ['signal', 'sleep', 'any'] as const) {
      expect(await engine.client.listRuns({ waiting })).toEqual([]);
      expect(await engine.client.countRuns({ waiting })).toBe(0);
    }
    expect((await engine.client.getRun(h.sleep.id))!).toMatchObject({ status: 'canceled' });
    expect((await engine.client.getRun(h.sleep.id))!.waitingFor).toBeUndefined();
  });

  it('a list skips, and takes out, index entries whose run no longer waits so (or is gone); a deleted run is not listed', async () => {
    const { h } = await startWaitingRuns();
    const index = engine.client.keys.waiting('signal', 'approve');
    // Entries a crash or an edit could leave: a run that is gone, a run waiting for something else.
    await engine.redis.zadd(index, String(Date.now() + 1), 'no-such-run', String(Date.now() + 2), h.otherSignal.id);
    expect(ids(await engine.client.listRunSummaries({ waiting: 'signal:approve' }))).toEqual([h.signal.id]);
    expect(ids(await engine.client.listRuns({ waiting: 'signal:approve', limit: 1 }))).toEqual([h.signal.id]);
    expect((await engine.redis.zrange(index, '0', '-1')).sort()).toEqual([h.signal.id]);

    await engine.client.deleteRun(h.signal.id, { force: true });
    expect(await engine.client.getRun(h.signal.id)).toBeNull();
    expect(await engine.client.listRuns({ waiting: 'signal:approve' })).toEqual([]);
    expect(await engine.client.countRuns({ waiting: 'signal:approve' })).toBe(0);
    expect(ids(await engine.client.listRuns({ waiting: 'signal' }))).not.toContain(h.signal.id);
  });

  it('a bad waiting filter is a ConfigurationError naming the accepted forms; another status than scheduled too', async () => {
    for (const bad of ['signals', 'signal:', 'timer:x', 7, 'event:a\nb']) {
      const call = engine.client.listRuns({ waiting: bad as WaitingFilter });
      await expect(call).rejects.toThrow(ConfigurationError);
      await expect(engine.client.countRuns({ waiting: bad as WaitingFilter })).rejects.toThrow(
        /countRuns waiting must be one of "sleep", "signal", "event", "child", "any", "signal:<name>" or "event:<name>"/,
      );
    }
    await expect(engine.client.listRunSummaries({ waiting: 'signal', status: 'running' })).rejects.toThrow(
      'listRunSummaries waiting lists runs suspended in a step, which are "scheduled"',
    );
    await expect(engine.client.countRuns({ waiting: 'signal', status: 'scheduled' })).resolves.toBe(0);
  });
});
