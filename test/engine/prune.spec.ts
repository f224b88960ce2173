import { ConfigurationError, type EndedStatus, type RunStatus, type WorkflowContext } from '../../lib';
import { scanPrefix } from '../../lib/core/store/prefix-scan';
import { countScriptCalls, TestEngine } from '../support/engine';

/**
 * `client.prune` deletes ended runs older than a cutoff, in atomic batches, with everything each
 * run owns (through the same Lua function as retention), and never a run that has not ended.
 */
describe('prune', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const DAY_MS = 86_400_000;
  const LEASE_MS = 60_000;
  const ERROR = JSON.stringify({ name: 'Error', message: 'declined' });
  let tokens = 0;

  /** Registers workflows `names` in Redis (no worker), without a concurrency limit. */
  async function register(...names: string[]): Promise<void> {
    for (const name of names) engine.define(name, { maxConcurrency: Infinity }, () => null);
    await engine.client.syncRegistry(engine.registry, { owner: 'test' });
  }

  /**
   * `count` runs of `workflow` that ended in `status` at `finishedAt`, moved there by the
   * scripts a worker and `cancelRun` use (claim and finish, or cancel), with that time as now.
   */
  async function ended(workflow: string, status: EndedStatus, count: number, finishedAt: number, idempotencyKey?: (i: number) => string): Promise<string[]> {
    const { client } = engine;
    const ids = await Promise.all(
      Array.from({ length: count }, async (_, i) => (await client.runByName(workflow, { i }, idempotencyKey ? { idempotencyKey: idempotencyKey(i) } : {})).id),
    );
    if (status === 'canceled') {
      await Promise.all(ids.map((id) => client.scripts.cancel(id, finishedAt, ERROR, 'old')));
      return ids;
    }
    if (status === 'terminated') {
      await Promise.all(ids.map((id) => client.scripts.terminate(id, finishedAt, ERROR, 'old')));
      return ids;
    }
    await Promise.all(
      ids.map(async () => {
        const token = `t${++tokens}`;
        const claimed = await client.scripts.claim('default', token, Date.now(), LEASE_MS);
        await client.scripts.finish({
          runId: claimed!.runId,
          queue: 'default',
          token,
          now: finishedAt,
          outcome: status,
          payload: status === 'succeeded' ? '"done"' : ERROR,
          dueAt: 0,
          nextToken: '',
          leaseMs: LEASE_MS,
          waitFields: [],
          records: [],
        });
      }),
    );
    return ids;
  }

  /** Run ids by status, sorted. */
  async function statuses(): Promise<Partial<Record<RunStatus, string[]>>> {
    const out: Partial<Record<RunStatus, string[]>> = {};
    for (const run of await engine.client.listRuns({ limit: 10_000 })) (out[run.status] ??= []).push(run.id);
    for (const ids of Object.values(out)) ids.sort();
    return out;
  }

  /** Every key of the prefix. */
  async function allKeys(): Promise<string[]> {
    const found: string[] = [];
    await scanPrefix(engine.redis, engine.client.keys, '*', async (keys) => {
      found.push(...keys);
    });
    return found.sort();
  }

  /**
   * Entries of the run indexes, the schedules and the idempotency keys whose run does not exist.
   * (Ready lists are left out: a run canceled while queued leaves its id there until the next
   * claim drops it, pruned or not.)
   */
  async function dangling(): Promise<string[]> {
    const { redis } = engine;
    const base = engine.client.keys.base;
    const out: string[] = [];
    for (const key of await allKeys()) {
      const rest = key.slice(base.length);
      let ids: string[] = [];
      if (/^(status:[a-z]+|leases|wfstatus:.+|wf:.+:(runs|active)|q:.+:scheduled)$/.test(rest)) ids = await redis.zrange(key, 0, '-1');
      else if (/^wf:.+:parked$/.test(rest)) ids = await redis.lrange(key, 0, -1);
      else if (rest.startsWith('idem:')) ids = [(await redis.get(key))!.split('|')[0]];
      for (const id of ids) if (!(await redis.exists(engine.client.keys.run(id)))) out.push(`${rest} -> ${id}`);
    }
    return out;
  }

  it('deletes ended runs that finished before olderThan, keeps newer ones, and never touches a run that has not ended', async () => {
    await register('charge');
    const { client } = engine;
    const old = Date.now() - 8 * DAY_MS;
    const recent = Date.now() - 60_000;
    const oldRuns = [
      ...(await ended('charge', 'succeeded', 3, old)),
      ...(await ended('charge', 'failed', 2, old)),
      ...(await ended('charge', 'canceled', 2, old)),
      ...(await ended('charge', 'terminated', 1, old)),
    ];
    const recentRuns = [
      ...(await ended('charge', 'succeeded', 2, recent)),
      ...(await ended('charge', 'failed', 1, recent)),
      ...(await ended('charge', 'canceled', 1, recent)),
      ...(await ended('charge', 'terminated', 1, recent)),
    ];
    // Live runs: one running (claimed), one queued, one scheduled.
    const running = (await client.runByName('charge', {})).id;
    expect((await client.scripts.claim('default', 'live', Date.now(), LEASE_MS))?.runId).toBe(running);
    const queued = (await client.runByName('charge', {})).id;
    const scheduled = (await client.runByName('charge', {}, { runAt: Date.now() + DAY_MS })).id;
    expect(await client.countRuns()).toBe(16);

    await expect(client.prune({ olderThan: '7d' })).resolves.toEqual({ deleted: 8 });

    for (const id of oldRuns) expect(await client.getRun(id)).toBeNull();
    const left = await statuses();
    expect(left).toEqual({
      succeeded: recentRuns.slice(0, 2).sort(),
      failed: [recentRuns[2]],
      canceled: [recentRuns[3]],
      terminated: [recentRuns[4]],
      running: [running],
      queued: [queued],
      scheduled: [scheduled],
    });
    expect(await client.countRuns()).toBe(8);
    expect(await client.countRuns({ workflow: 'charge' })).toBe(8);
    expect(await dangling()).toEqual([]);

    // Even with olderThan 0, every ended run goes and every live run stays.
    await expect(client.prune({ olderThan: 0 })).resolves.toEqual({ deleted: 5 });
    expect(await statuses()).toEqual({ running: [running], queued: [queued], scheduled: [scheduled] });
    await expect(client.prune({ olderThan: 0 })).resolves.toEqual({ deleted: 0 });
    expect(await dangling()).toEqual([]);
  });

  it('deletes only the given statuses, and with a workflow only that workflow’s runs', async () => {
    await register('charge', 'ship');
    const { client } = engine;
    const old = Date.now() - 2 * DAY_MS;
    const charge = {
      succeeded: await ended('charge', 'succeeded', 2, old),
      failed: await ended('charge', 'failed', 2, old),
      canceled: await ended('charge', 'canceled', 1, old),
    };
    const ship = {
      succeeded: await ended('ship', 'succeeded', 1, old),
      failed: await ended('ship', 'failed', 3, old),
      canceled: await ended('ship', 'canceled', 1, old),
    };

    await expect(client.prune({ olderThan: '1d', statuses: ['failed'], workflow: 'charge' })).resolves.toEqual({ deleted: 2 });
    expect(await client.countRuns({ workflow: 'charge', status: 'failed' })).toBe(0);
    expect(await client.countRuns({ workflow: 'ship', status: 'failed' })).toBe(3);
    expect(await client.countRuns()).toBe(8);

    await expect(client.prune({ olderThan: '1d', statuses: ['failed', 'canceled'] })).resolves.toEqual({ deleted: 5 });
    expect(await statuses()).toEqual({ succeeded: [...charge.succeeded, ...ship.succeeded].sort() });
    for (const id of [...charge.canceled, ...ship.failed, ...ship.canceled]) expect(await client.getRun(id)).toBeNull();

    await expect(client.prune({ olderThan: '1d', workflow: 'ship' })).resolves.toEqual({ deleted: 1 });
    expect(await statuses()).toEqual({ succeeded: charge.succeeded.sort() });
    // A workflow with no runs, or runs newer than the cutoff: nothing to delete.
    await expect(client.prune({ olderThan: '1d', workflow: 'nobody' })).resolves.toEqual({ deleted: 0 });
    await expect(client.prune({ olderThan: '3d' })).resolves.toEqual({ deleted: 0 });
    expect(await dangling()).toEqual([]);
  });

  it('works in atomic batches of 500 until none is left', async () => {
    await register('bulk');
    const { client } = engine;
    const old = Date.now() - 2 * DAY_MS;
    await ended('bulk', 'succeeded', 700, old);
    await ended('bulk', 'failed', 300, old);
    await ended('bulk', 'canceled', 100, old);
    const kept = await ended('bulk', 'succeeded', 5, Date.now());
    const taken: number[] = [];
    const prune = client.scripts.prune.bind(client.scripts);
    const spy = jest.spyOn(client.scripts, 'prune').mockImplementation(async (a) => {
      const batch = await prune(a);
      taken.push(batch.taken);
      return batch;
    });
    const calls = countScriptCalls(engine.redis);
    try {
      await expect(client.prune({ olderThan: '1d' })).resolves.toEqual({ deleted: 1_100 });
    } finally {
      spy.mockRestore();
    }
    expect(taken).toEqual([500, 500, 100]);
    expect(calls.prune).toBe(3);
    expect(await statuses()).toEqual({ succeeded: kept.sort() });
    expect(await dangling()).toEqual([]);
  });

  it('deletes what each run owned: step records, idempotency key and children set; no key of the prefix names a deleted run', async () => {
    const child = engine.define('receipt', {}, ({ input }: WorkflowContext<{ order: string }>) => ({ sent: input.order }));
    const parent = engine.define('checkout', { maxConcurrency: Infinity }, async ({ input, step }: WorkflowContext<{ order: string }>) => {
      const charged = await step.run('charge', () => `ch_${input.order}`);
      const receipt = await step.runWorkflow('receipt', child, { order: input.order });
      return { charged, receipt };
    });
    await engine.worker();
    const { client } = engine;
    const first = await client.start(parent, { order: 'o-1' }, { idempotencyKey: 'order-1' });
    await expect(first.result({ timeoutMs: 5_000 })).resolves.toEqual({ charged: 'ch_o-1', receipt: { sent: 'o-1' } });
    const childId = `${first.id}.receipt`;
    expect(await client.getRunChildren(first.id)).toEqual([childId]);
    const mentions = async (id: string) => (await allKeys()).filter((key) => key.includes(id));
    expect(await mentions(first.id)).not.toEqual([]);

    await expect(client.prune({ olderThan: 0 })).resolves.toEqual({ deleted: 2 });
    expect(await mentions(first.id)).toEqual([]);
    expect(await client.getRunSteps(first.id)).toEqual([]);
    expect(await client.getRunChildren(first.id)).toEqual([]);
    expect(await client.getRun(childId)).toBeNull();
    expect(await dangling()).toEqual([]);
    // The idempotency key went with its run: the same key starts a new run.
    const second = await client.start(parent, { order: 'o-1' }, { idempotencyKey: 'order-1' });
    expect(second.id).not.toBe(first.id);
    await expect(second.result({ timeoutMs: 5_000 })).resolves.toEqual({ charged: 'ch_o-1', receipt: { sent: 'o-1' } });
  });

  it('rejects bad options with ConfigurationError before deleting anything', async () => {
    await register('charge');
    const { client } = engine;
    await ended('charge', 'succeeded', 2, Date.now() - 2 * DAY_MS);
    const bad = (options: unknown) => client.prune(options as never);
    await expect(bad(undefined)).rejects.toThrow(
      new ConfigurationError('prune needs olderThan: how long ago a run must have finished to be deleted (ms, or a string such as "7d").'),
    );
    await expect(bad({})).rejects.toThrow(ConfigurationError);
    await expect(bad({ olderThan: '7d', olderthan: '1d' })).rejects.toThrow('Unknown option "olderthan" in prune options. Did you mean "olderThan"?');
    await expect(bad({ olderThan: '7 days' })).rejects.toThrow(
      'prune olderThan must be a duration >= 0 and at most 10 years (a number of ms or a string like "5s"), got "7 days".',
    );
    await expect(bad({ olderThan: -1 })).rejects.toThrow(ConfigurationError);
    await expect(bad({ olderThan: '1d', statuses: ['failed', 'running'] })).rejects.toThrow(
      new ConfigurationError(
        'prune statuses may hold only succeeded, failed, canceled, terminated, got "running": runs that have not ended are never pruned (cancel them first).',
      ),
    );
    await expect(bad({ olderThan: '1d', statuses: [] })).rejects.toThrow(
      'prune statuses must be a non-empty array of succeeded, failed, canceled, terminated, got an array.',
    );
    await expect(bad({ olderThan: '1d', statuses: 'failed' })).rejects.toThrow(
      'prune statuses must be a non-empty array of succeeded, failed, canceled, terminated, got "failed".',
    );
    await expect(bad({ olderThan: '1d', workflow: '' })).rejects.toThrow('prune workflow must be a workflow name, got "".');
    await expect(bad({ olderThan: '1d', workflow: 7 })).rejects.toThrow(ConfigurationError);
    expect(await client.countRuns()).toBe(2);
  });
});
