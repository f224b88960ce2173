import { IsInt, IsString, Min } from 'class-validator';
import { z } from 'zod';

import {
  CanceledError,
  createAdmin,
  createClient,
  IdempotencyConflictError,
  InputValidationError,
  PayloadTooLargeError,
  RunNotFoundError,
  TimeoutError,
  UnknownWorkflowError,
  WorkflowRegistry,
} from '../../lib';
import { TestEngine } from '../support/engine';

class OrderDto {
  @IsString() orderId!: string;
  @IsInt() @Min(1) cents!: number;
}

describe('client', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const runKeys = async () => (await engine.client.listRuns({ limit: 100 })).length;

  it('rejects an unknown workflow name and stores nothing', async () => {
    await expect(engine.client.runByName('nope', {})).rejects.toThrow(UnknownWorkflowError);
    await expect(engine.client.runByName('nope', {})).rejects.toThrow('Workflow "nope" is not registered');
    expect(await runKeys()).toBe(0);
  });

  it('starts a workflow known only from the Redis registry, on its registered queue', async () => {
    const remote = new WorkflowRegistry();
    remote.define('remote-wf', { queue: 'far', maxAttempts: 3 }, () => 1);
    await engine.client.syncRegistry(remote, { owner: 'other-app' });
    const handle = await engine.client.runByName('remote-wf', { a: 1 });
    expect(await handle.getState()).toMatchObject({ workflow: 'remote-wf', queue: 'far', maxAttempts: 3, status: 'queued', input: { a: 1 } });
  });

  it('validates input with a Standard Schema on enqueue and stores nothing when invalid', async () => {
    const wf = engine.registry.define('zod-wf', { schema: z.object({ email: z.string().email() }) }, ({ input }) => input.email);
    const error = await engine.client.start(wf, { email: 'not-an-email' }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InputValidationError);
    expect((error as InputValidationError).issues[0].path).toEqual(['email']);
    expect((error as Error).message).toMatch(/^Input for workflow "zod-wf" is invalid: email: /);
    await expect(engine.client.runByName('zod-wf', { email: 3 })).rejects.toThrow(InputValidationError);
    expect(await runKeys()).toBe(0);
    await expect(engine.client.start(wf, { email: 'a@b.co' })).resolves.toHaveProperty('id');
  });

  it('validates input with a class-validator DTO on enqueue', async () => {
    const wf = engine.registry.define('dto-wf', { schema: OrderDto }, ({ input }) => input.cents);
    const error = (await engine.client.start(wf, { orderId: 'o1', cents: 0 } as OrderDto).catch((e: unknown) => e)) as InputValidationError;
    expect(error).toBeInstanceOf(InputValidationError);
    expect(error.issues).toEqual([{ message: 'cents must not be less than 1', path: ['cents'] }]);
    await expect(engine.client.runByName('dto-wf', 'a string')).rejects.toThrow('expected an object for OrderDto, got string');
    expect(await runKeys()).toBe(0);
  });

  it('rejects an oversized input with PayloadTooLargeError', async () => {
    const small = createClient({ redis: engine.redis, prefix: engine.prefix, registry: engine.registry, maxPayloadBytes: 100 });
    engine.registry.define('big', {}, () => 1);
    const error = await small.runByName('big', { blob: 'x'.repeat(200) }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(PayloadTooLargeError);
    expect((error as Error).message).toBe(
      'The input of workflow "big" is 211 bytes, over the 100-byte limit. Store large data elsewhere and pass a reference, or raise maxPayloadBytes.',
    );
    expect(await runKeys()).toBe(0);
  });

  it('rejects an input that is not JSON with InputValidationError', async () => {
    engine.registry.define('json-only', {}, () => 1);
    await expect(engine.client.runByName('json-only', { when: new Map() })).rejects.toThrow(
      'Input for workflow "json-only" is invalid: $.when is a Map (JSON would store {}; convert it with Object.fromEntries(map)). Fix the input to match the workflow\'s schema.',
    );
    expect(await runKeys()).toBe(0);
  });

  it('returns the existing run for a repeated idempotency key and rejects a different input', async () => {
    engine.registry.define('idem', {}, () => 1);
    const first = await engine.client.runByName('idem', { n: 1 }, { idempotencyKey: 'k1', idempotencyTtl: 60 });
    const again = await engine.client.runByName('idem', { n: 1 }, { idempotencyKey: 'k1' });
    expect(again.id).toBe(first.id);
    const conflict = await engine.client.runByName('idem', { n: 2 }, { idempotencyKey: 'k1' }).catch((e: unknown) => e);
    expect(conflict).toBeInstanceOf(IdempotencyConflictError);
    expect((conflict as IdempotencyConflictError).existingRunId).toBe(first.id);
    expect(await runKeys()).toBe(1);
    const ttl = await engine.redis.ttl(engine.client.keys.idempotency('idem', 'k1'));
    expect(ttl).toBeGreaterThan(50);
    expect(ttl).toBeLessThanOrEqual(60);
    const other = await engine.client.runByName('idem', { n: 2 }, { idempotencyKey: 'k2' });
    expect(other.id).not.toBe(first.id);
  });

  it('keeps a run with runAt scheduled, and cancels scheduled and queued runs at once', async () => {
    engine.registry.define('later', {}, () => 1);
    const scheduled = await engine.client.runByName('later', null, { runAt: new Date(Date.now() + 60_000) });
    const queued = await engine.client.runByName('later', null);
    expect((await scheduled.getState())?.status).toBe('scheduled');
    expect((await queued.getState())?.status).toBe('queued');

    expect(await engine.client.cancelRun(scheduled.id, { reason: 'not needed' })).toBe(true);
    expect(await engine.client.cancelRun(queued.id)).toBe(true);
    expect(await engine.client.cancelRun(queued.id)).toBe(false);
    expect(await engine.client.cancelRun('missing-id')).toBe(false);

    expect(await scheduled.getState()).toMatchObject({ status: 'canceled', cancelReason: 'not needed', error: { name: 'CanceledError' } });
    await expect(scheduled.result()).rejects.toThrow(CanceledError);
    await expect(queued.result()).rejects.toThrow(`Run "${queued.id}" was canceled.`);
    expect(await engine.redis.zcard(engine.client.keys.scheduled('default'))).toBe(0);
  });

  it('times out waiting for a result with TimeoutError', async () => {
    engine.registry.define('slow', {}, () => 1);
    const handle = await engine.client.runByName('slow', null);
    const error = await handle.result({ timeoutMs: 30 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TimeoutError);
    expect((error as Error).message).toBe(`Waiting for the result of run "${handle.id}" timed out after 30 ms. Raise its timeout if it needs longer.`);
  });

  it('lists runs newest first by workflow, by status, by both, with limit and offset', async () => {
    engine.registry.define('wa', {}, () => 1);
    engine.registry.define('wb', {}, () => 1);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push((await engine.client.runByName(i % 2 ? 'wb' : 'wa', { i })).id);
      await new Promise((r) => setTimeout(r, 2)); // distinct creation times for a stable order
    }
    await engine.client.cancelRun(ids[2]);
    // Live runs sort by creation, ended ones by finish: the canceled run is the newest event.
    expect((await engine.client.listRuns()).map((r) => r.id)).toEqual([ids[2], ids[3], ids[1], ids[0]]);
    expect((await engine.client.listRuns({ workflow: 'wa' })).map((r) => r.id)).toEqual([ids[2], ids[0]]);
    expect((await engine.client.listRuns({ status: 'queued' })).map((r) => r.id)).toEqual([ids[3], ids[1], ids[0]]);
    expect((await engine.client.listRuns({ workflow: 'wa', status: 'queued' })).map((r) => r.id)).toEqual([ids[0]]);
    expect((await engine.client.listRuns({ workflow: 'wa', status: 'canceled' })).map((r) => r.id)).toEqual([ids[2]]);
    expect((await engine.client.listRuns({ limit: 2, offset: 1 })).map((r) => r.id)).toEqual([ids[3], ids[1]]);
    expect((await engine.client.listRuns({ workflow: 'wb', limit: 1, offset: 1 })).map((r) => r.id)).toEqual([ids[1]]);
    expect(await engine.client.getRun('no-such-run')).toBeNull();
  });

  it('prunes stale workflows only for the owner that registered them', async () => {
    const a = new WorkflowRegistry();
    a.define('a1', {}, () => 1);
    a.define('a2', { queue: 'q2' }, () => 1);
    const b = new WorkflowRegistry();
    b.define('b1', {}, () => 1);
    await engine.client.syncRegistry(a, { owner: 'app-a' });
    await engine.client.syncRegistry(b, { owner: 'app-b' });
    expect((await engine.client.listWorkflows()).map((w) => [w.name, w.owner, w.queue])).toEqual([
      ['a1', 'app-a', 'default'],
      ['a2', 'app-a', 'q2'],
      ['b1', 'app-b', 'default'],
    ]);
    const smaller = new WorkflowRegistry();
    smaller.define('a1', {}, () => 1);
    expect(await engine.client.syncRegistry(smaller, { owner: 'app-a' })).toEqual(['a2']);
    expect((await engine.client.listWorkflows()).map((w) => w.name)).toEqual(['a1', 'b1']);
    expect(await engine.client.getWorkflowMeta('a2')).toBeNull();
    expect(await engine.client.getWorkflowMeta('b1')).toMatchObject({ name: 'b1', owner: 'app-b', maxAttempts: 1 });
    // A producer that loads fewer workflows registers without removing the others.
    expect(await engine.client.syncRegistry(new WorkflowRegistry(), { owner: 'app-a', prune: false })).toEqual([]);
    expect((await engine.client.listWorkflows()).map((w) => w.name)).toEqual(['a1', 'b1']);
  });

  it('rerun starts a new run with the same input, queue and flow-control keys', async () => {
    const wf = engine.registry.define('locked', { queue: 'ops', maxAttempts: 2, mutex: (input: { account: string }) => `acct:${input.account}` }, () => 1);
    const original = await engine.client.start(wf, { account: 'A' });
    await engine.client.cancelRun(original.id);
    const again = await engine.client.rerun(original.id);
    expect(again.id).not.toBe(original.id);
    expect(await again.getState()).toMatchObject({ workflow: 'locked', queue: 'ops', maxAttempts: 2, status: 'queued', input: { account: 'A' } });
    expect(await engine.redis.hget(engine.client.keys.run(again.id), 'mutex')).toBe('acct:A');
    await expect(engine.client.rerun('missing')).rejects.toThrow(RunNotFoundError);
  });

  it('resetState deletes only its own prefix', async () => {
    engine.registry.define('r', {}, () => 1);
    const other = createClient({ redis: engine.redis, prefix: `${engine.prefix}-other`, registry: engine.registry });
    const keep = await other.runByName('r', null);
    await engine.client.runByName('r', null);
    await createAdmin(engine.client).resetState();
    expect(await engine.client.listRuns()).toEqual([]);
    expect((await keep.getState())?.status).toBe('queued');
    await createAdmin(other).resetState();
  });
});
