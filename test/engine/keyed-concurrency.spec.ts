import type { WorkflowContext } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

type TenantInput = { tenant: string; i: number };

/**
 * `concurrency: { key, limit }`: at most `limit` runs per key running at once, fleet-wide; a key
 * at its limit waits out of the queue (no head-of-line blocking), and keys take turns: each key
 * with runs waiting holds one place in the ready list (ready.lua, claim.lua, admit.lua).
 */
describe('keyed concurrency', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  /** Counts the running runs per tenant and keeps the peak of each. */
  function tracker() {
    const running = new Map<string, number>();
    const peak = new Map<string, number>();
    return {
      running,
      peak,
      enter(tenant: string) {
        const now = (running.get(tenant) ?? 0) + 1;
        running.set(tenant, now);
        peak.set(tenant, Math.max(peak.get(tenant) ?? 0, now));
      },
      leave(tenant: string) {
        running.set(tenant, running.get(tenant)! - 1);
      },
    };
  }

  it("starts tenant B's one run after at most one run of tenant A, though A enqueued 10,000 before it", async () => {
    const started: string[] = [];
    const wf = engine.define(
      'per-tenant',
      { concurrency: { key: (input: TenantInput) => input.tenant, limit: 5 } },
      async ({ input }: WorkflowContext<TenantInput>) => {
        started.push(`${input.tenant}${input.i}`);
      },
    );
    await engine.client.runManyByName(
      wf.name,
      Array.from({ length: 10_000 }, (_, i) => ({ input: { tenant: 'A', i } })),
    );
    const b = await engine.client.start(wf, { tenant: 'B', i: 0 });
    // The queue's depth counts the runs in the keys' lists, not the keys' places.
    expect((await engine.client.getQueueStats({ queues: [wf.queue] }))[0]).toMatchObject({ queued: 10_001 });
    // One worker claiming one run at a time: the claim order is the start order.
    await engine.worker({ concurrency: 1 });
    await b.result({ timeout: '10s' });
    // The stated bound: at most one run of each other key waiting before B's place.
    expect(started.indexOf('B0')).toBeLessThanOrEqual(1);
    // Then A's runs go on in their order.
    await eventually(() => started.length >= 4);
    expect(started.filter((id) => id.startsWith('A')).slice(0, 3)).toEqual(['A0', 'A1', 'A2']);
  });

  it('never runs more than the limit per key under 4 workers, and a busy key does not hold up the others', async () => {
    const t = tracker();
    const gates = new Map<string, { promise: Promise<void>; resolve: (value: void) => void }>();
    const wf = engine.define(
      'limited',
      { concurrency: { key: (input: TenantInput) => input.tenant, limit: 2 } },
      async ({ input }: WorkflowContext<TenantInput>) => {
        t.enter(input.tenant);
        try {
          await gates.get(input.tenant)?.promise;
        } finally {
          t.leave(input.tenant);
        }
      },
    );
    for (const tenant of ['x', 'y', 'z']) gates.set(tenant, deferred());
    const handles = await engine.client.runManyByName(
      wf.name,
      ['x', 'y', 'z'].flatMap((tenant) => Array.from({ length: 12 }, (_, i) => ({ input: { tenant, i } }))),
    );
    for (let w = 0; w < 4; w++) await engine.worker({ concurrency: 4 });
    // 16 slots in the fleet, 36 runs: each key runs exactly its 2 while the others wait queued.
    await eventually(() => ['x', 'y', 'z'].every((tenant) => t.running.get(tenant) === 2));
    expect(await engine.client.countRuns({ workflow: 'limited', status: 'running' })).toBe(6);
    // Tenant x's runs end; y and z stay busy at their limit, and x's backlog drains past them.
    gates.get('x')!.resolve(undefined);
    await eventually(async () => (await engine.client.countRuns({ workflow: 'limited', status: 'succeeded' })) === 12, 10_000);
    expect(t.running.get('y')).toBe(2);
    for (const tenant of ['y', 'z']) gates.get(tenant)!.resolve(undefined);
    await Promise.all(handles.map((h) => h.result({ timeout: '20s' })));
    expect(Object.fromEntries(t.peak)).toEqual({ x: 2, y: 2, z: 2 });
  });

  it('frees the slot of a waiting run, and the woken run waits its turn at the front of its key', async () => {
    const order: string[] = [];
    const gate = deferred();
    const wf = engine.define('one-at-a-time', { concurrency: { key: 'only', limit: 1 } }, async ({ input, step }: WorkflowContext<{ tag: string }>) => {
      order.push(`${input.tag} start`);
      if (input.tag === 'sleeper') await step.sleep('nap', '1h');
      else await gate.promise;
      order.push(`${input.tag} end`);
    });
    await engine.worker({ concurrency: 4 });
    const sleeper = await engine.client.start(wf, { tag: 'sleeper' });
    await eventually(async () => (await engine.client.getRun(sleeper.id))?.status === 'scheduled');
    // The sleeper holds no slot while it waits: the next run of its key starts.
    await engine.client.start(wf, { tag: 'busy' });
    await eventually(() => order.includes('busy start'));
    // Woken while the key is at its limit, the sleeper goes back first in line, and runs when busy ends.
    await engine.clock.advance('1h');
    await eventually(async () => (await engine.client.getRun(sleeper.id))?.status === 'queued');
    gate.resolve();
    await sleeper.result({ timeout: '10s' });
    expect(order).toEqual(['sleeper start', 'busy start', 'busy end', 'sleeper start', 'sleeper end']);
  });

  it('a canceled running run gives its slot to the next run of its key', async () => {
    const started: number[] = [];
    const gate = deferred();
    const wf = engine.define('cancel-frees', { concurrency: { key: 'k', limit: 1 } }, async ({ input, signal }: WorkflowContext<TenantInput>) => {
      started.push(input.i);
      if (input.i === 0) await new Promise((resolve) => signal.addEventListener('abort', resolve));
      else await gate.promise;
    });
    await engine.worker({ concurrency: 4 });
    const first = await engine.client.start(wf, { tenant: 'k', i: 0 });
    await eventually(() => started.length === 1);
    const second = await engine.client.start(wf, { tenant: 'k', i: 1 });
    await expect(engine.client.getRun(second.id)).resolves.toMatchObject({ status: 'queued' });
    await engine.client.cancelRun(first.id);
    await eventually(() => started.length === 2);
    gate.resolve();
    await second.result({ timeout: '10s' });
    expect(started).toEqual([0, 1]);
  });

  it("with scope 'queue', the workflows of a queue share each key's count", async () => {
    const t = tracker();
    const gate = deferred();
    const handler = async ({ input }: WorkflowContext<TenantInput>) => {
      t.enter(input.tenant);
      try {
        await gate.promise;
      } finally {
        t.leave(input.tenant);
      }
    };
    const concurrency = { key: (input: TenantInput) => input.tenant, limit: 1, scope: 'queue' as const };
    const exports = engine.define('export', { queue: 'tenant-jobs', concurrency }, handler);
    const imports = engine.define('import', { queue: 'tenant-jobs', concurrency }, handler);
    const handles = [
      await engine.client.start(exports, { tenant: 'a', i: 0 }),
      await engine.client.start(imports, { tenant: 'a', i: 1 }),
      await engine.client.start(imports, { tenant: 'b', i: 2 }),
    ];
    await engine.worker({ concurrency: 8 });
    // Tenant a's export runs; its import waits for it; tenant b's import runs beside them.
    await eventually(() => t.running.get('a') === 1 && t.running.get('b') === 1);
    await expect(engine.client.getRun(handles[1].id)).resolves.toMatchObject({ status: 'queued' });
    gate.resolve();
    await Promise.all(handles.map((h) => h.result({ timeout: '10s' })));
    expect(Object.fromEntries(t.peak)).toEqual({ a: 1, b: 1 });
  });

  it("a keyed throttle: a key over its window waits scheduled, and another key's run behind it starts at once", async () => {
    const started: string[] = [];
    const wf = engine.define(
      'per-tenant-throttle',
      { throttle: { limit: 1, period: '1h', key: (input: TenantInput) => input.tenant } },
      async ({ input }: WorkflowContext<TenantInput>) => {
        started.push(`${input.tenant}${input.i}`);
      },
    );
    const a = await engine.client.runManyByName(
      wf.name,
      Array.from({ length: 50 }, (_, i) => ({ input: { tenant: 'A', i } })),
    );
    const b = await engine.client.start(wf, { tenant: 'B', i: 0 });
    await engine.worker({ concurrency: 1 });
    await b.result({ timeout: '10s' });
    expect(started).toEqual(['A0', 'B0']);
    // A's other 49 wait for their window, with no attempt used.
    await expect(engine.client.getRun(a[1].id)).resolves.toMatchObject({ status: 'scheduled', attempt: 0 });
  });
});
