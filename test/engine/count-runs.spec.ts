import { ConfigurationError, NonRetriableError } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/** `countRuns` reads the sizes of the indexes `listRuns` pages through: one ZCARD per filter. */
describe('countRuns', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('counts real runs in every status, by workflow, by status, by both, and in all', async () => {
    const release = deferred();
    const started = deferred();
    const ship = engine.define('ship', {}, () => 'shipped');
    const charge = engine.define('charge', { maxConcurrency: Infinity }, async ({ input }: { input: { hold?: boolean; fail?: boolean } }) => {
      if (input.fail) throw new NonRetriableError('card declined');
      if (input.hold) {
        started.resolve();
        await release.promise;
      }
      return 'charged';
    });
    // Served by no worker: its runs stay queued.
    const audit = engine.define('audit', { queue: 'unserved' }, () => null);
    await engine.worker({ queues: ['default'] });
    const { client } = engine;

    const done = await Promise.all([client.start(charge, {}), client.start(charge, {}), client.start(ship, {})]);
    const failed = await client.start(charge, { fail: true });
    await Promise.all(done.map((h) => h.result({ timeoutMs: 5_000 })));
    await expect(failed.result({ timeoutMs: 5_000 })).rejects.toThrow('card declined');
    const held = await client.start(charge, { hold: true });
    await started.promise;
    const later = Date.now() + 60_000;
    await client.start(charge, {}, { runAt: later });
    await client.start(ship, {}, { runAt: later });
    const canceled = await client.start(ship, {}, { runAt: later });
    expect(await client.cancelRun(canceled.id)).toBe(true);
    await client.start(audit, null);
    await client.start(audit, null);

    expect(await client.countRuns()).toBe(10);
    expect(await client.countRuns({})).toBe(10);
    const byStatus = Object.fromEntries(
      await Promise.all(
        (['scheduled', 'queued', 'running', 'succeeded', 'failed', 'canceled'] as const).map(async (status) => [status, await client.countRuns({ status })]),
      ),
    );
    expect(byStatus).toEqual({ scheduled: 2, queued: 2, running: 1, succeeded: 3, failed: 1, canceled: 1 });
    expect(await client.countRuns({ workflow: 'charge' })).toBe(5);
    expect(await client.countRuns({ workflow: 'ship' })).toBe(3);
    expect(await client.countRuns({ workflow: 'audit' })).toBe(2);
    expect(await client.countRuns({ workflow: 'nobody' })).toBe(0);
    expect(await client.countRuns({ workflow: 'charge', status: 'succeeded' })).toBe(2);
    expect(await client.countRuns({ workflow: 'charge', status: 'failed' })).toBe(1);
    expect(await client.countRuns({ workflow: 'charge', status: 'running' })).toBe(1);
    expect(await client.countRuns({ workflow: 'charge', status: 'scheduled' })).toBe(1);
    expect(await client.countRuns({ workflow: 'ship', status: 'canceled' })).toBe(1);
    expect(await client.countRuns({ workflow: 'audit', status: 'queued' })).toBe(2);
    expect(await client.countRuns({ workflow: 'audit', status: 'succeeded' })).toBe(0);
    // The counts are the lengths of the lists.
    expect(await client.countRuns({ workflow: 'charge', status: 'succeeded' })).toBe(
      (await client.listRuns({ workflow: 'charge', status: 'succeeded' })).length,
    );
    expect(await client.countRuns()).toBe((await client.listRuns({ limit: 1000 })).length);

    release.resolve();
    await held.result({ timeoutMs: 5_000 });
    await eventually(async () => (await client.countRuns({ status: 'running' })) === 0);
    expect(await client.countRuns({ workflow: 'charge', status: 'succeeded' })).toBe(3);
    expect(await client.countRuns()).toBe(10);
  });

  it('rejects unknown option keys and statuses with ConfigurationError, like listRuns', async () => {
    const { client } = engine;
    await expect(client.countRuns({ state: 'failed' } as never)).rejects.toThrow(ConfigurationError);
    await expect(client.countRuns({ state: 'failed' } as never)).rejects.toThrow('Unknown option "state" in countRuns options. Did you mean "status"?');
    await expect(client.countRuns({ limit: 10 } as never)).rejects.toThrow('Unknown option "limit" in countRuns options.');
    await expect(client.countRuns({ status: 'done' as never })).rejects.toThrow(
      'countRuns status must be one of scheduled, queued, running, compensating, succeeded, failed, canceled, compensation_failed, terminated, got "done".',
    );
    await expect(client.countRuns({ workflow: 42 as never })).rejects.toThrow(
      new ConfigurationError('countRuns workflow must be a workflow name, got number.'),
    );
    await expect(client.countRuns('failed' as never)).rejects.toThrow('countRuns options must be an object, got "failed".');
  });
});
