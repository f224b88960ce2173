import { randomBytes } from 'node:crypto';

import {
  createClient,
  RedisUnavailableError,
  startWorker,
  TimeoutError,
  WorkflowRegistry,
  type RedflowLogger,
  type Worker,
  type WorkflowClient,
} from '../../lib';
import { deferred, eventually, FAST_RUNTIME } from '../support/engine';
import { OwnRedis } from '../support/own-redis';

function captureLogger(): RedflowLogger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, log: (m) => lines.push(m), warn: (m) => lines.push(m), error: (m) => lines.push(m) };
}

/** How long `promise` takes to settle, and what it rejected with. */
async function timed(promise: Promise<unknown>): Promise<{ ms: number; error: unknown }> {
  const started = Date.now();
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  return { ms: Date.now() - started, error };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('Redis unreachable', () => {
  let server: OwnRedis;
  const clients: WorkflowClient[] = [];
  const workers: Worker[] = [];
  let consoleError: jest.SpyInstance;

  beforeEach(async () => {
    server = await OwnRedis.start(['--appendonly', 'yes', '--appendfsync', 'always']);
    consoleError = jest.spyOn(console, 'error');
  });

  afterEach(async () => {
    server.resume();
    for (const w of workers.splice(0)) await w.stop({ timeoutMs: 1000 });
    for (const c of clients.splice(0)) await c.close();
    await server.stop();
    // ioredis prints "[ioredis] Unhandled error event" through console.error when a connection has no listener.
    expect(consoleError.mock.calls.filter((args) => String(args[0]).includes('[ioredis]'))).toEqual([]);
    consoleError.mockRestore();
  });

  function newClient(registry: WorkflowRegistry, logger: RedflowLogger, commandTimeoutMs = 500): WorkflowClient {
    const client = createClient({ url: server.url, prefix: `outage:${randomBytes(4).toString('hex')}`, registry, logger, commandTimeoutMs });
    clients.push(client);
    return client;
  }

  it('a client and a worker close within seconds while Redis does not answer, instead of waiting for it', async () => {
    const registry = new WorkflowRegistry();
    registry.define('noop', {}, () => 'ok');
    const logger = captureLogger();
    const client = newClient(registry, logger);
    const worker = await startWorker({ app: 'outage', client, concurrency: 1, runtime: FAST_RUNTIME, logger });
    expect(await (await client.runByName('noop', {})).result({ timeoutMs: 5_000 })).toBe('ok');
    server.pause();
    const paused = newClient(registry, logger);
    await expect(paused.getRun('r1')).rejects.toThrow(RedisUnavailableError);
    expect((await timed(paused.close())).ms).toBeLessThan(3_000);
    // Before, a worker's stop() and a client's close() waited for Redis to answer again: forever.
    expect((await timed(worker.stop({ timeoutMs: 500 }))).ms).toBeLessThan(3_000);
    expect((await timed(client.close())).ms).toBeLessThan(3_000);
  });

  it('paused (SIGSTOP): every client call rejects within commandTimeoutMs with RedisUnavailableError, and result() with TimeoutError within timeoutMs', async () => {
    const registry = new WorkflowRegistry();
    const wf = registry.define('w', {}, () => 1);
    const client = newClient(registry, captureLogger());
    const handle = await client.start(wf, {});
    server.pause();

    const calls: Record<string, () => Promise<unknown>> = {
      runByName: () => client.runByName('w', {}),
      start: () => client.start(wf, {}),
      emitEvent: () => client.emitEvent('e', {}),
      getRun: () => client.getRun(handle.id),
      getRunSteps: () => client.getRunSteps(handle.id),
      cancelRun: () => client.cancelRun(handle.id),
      listRuns: () => client.listRuns(),
      listWorkflows: () => client.listWorkflows(),
      getStats: () => client.getStats(),
    };
    const outcomes = await Promise.all(Object.entries(calls).map(async ([name, call]) => [name, await timed(call())] as const));
    for (const [name, { ms, error }] of outcomes) {
      expect([name, error]).toEqual([name, expect.any(RedisUnavailableError)]);
      expect((error as Error).message).toContain(`Redis at 127.0.0.1:${server.port} is unavailable (no answer within 500 ms)`);
      expect(ms).toBeLessThan(500 + 1_000);
    }
    const waited = await timed(handle.result({ timeoutMs: 300 }));
    expect(waited.error).toBeInstanceOf(TimeoutError);
    expect(waited.ms).toBeLessThan(300 + 1_000);
  });

  it('killed and restarted: calls reject at once as unavailable, the worker logs once each way with the outage length, and the run completes', async () => {
    const registry = new WorkflowRegistry();
    const gate = deferred();
    const executions: Record<string, number> = {};
    const count = (step: string) => (executions[step] = (executions[step] ?? 0) + 1);
    const wf = registry.define('w', {}, async ({ step }) => {
      await step.run('first', async () => {
        count('first');
        await gate.promise;
        return 1;
      });
      await step.run('second', () => count('second'));
      return 'done';
    });
    const logger = captureLogger();
    const client = newClient(registry, logger);
    workers.push(await startWorker({ app: 'outage', client, registry, concurrency: 2, runtime: FAST_RUNTIME, logger }));
    const handle = await client.start(wf, {});
    await eventually(() => executions.first === 1);

    await server.kill();
    gate.resolve();
    const call = await timed(client.getRun(handle.id));
    expect(call.error).toBeInstanceOf(RedisUnavailableError);
    expect(call.ms).toBeLessThan(500 + 1_000);
    await sleep(1_500);
    expect(logger.lines.filter((l) => l.includes('is unreachable'))).toHaveLength(1);

    await server.restart();
    expect(await handle.result({ timeoutMs: 10_000 })).toBe('done');
    expect(executions.first).toBeLessThanOrEqual(2);
    expect(executions.second).toBe(1);
    await eventually(() => logger.lines.some((l) => l.includes('is reachable again after')));
    const back = logger.lines.filter((l) => l.includes('is reachable again after'));
    expect(back).toHaveLength(1);
    expect(back[0]).toMatch(/after \d+\.\d s/);
    expect(logger.lines.filter((l) => l.includes('is unreachable'))).toHaveLength(1);
  });
});

describe('Redis refusing connections, with the default commandTimeoutMs (10 s)', () => {
  it('once the client knows its connection is down, a call rejects at once with RedisUnavailableError; it works again when Redis is back', async () => {
    const server = await OwnRedis.start(['--appendonly', 'yes', '--appendfsync', 'always']);
    const registry = new WorkflowRegistry();
    registry.define('w', {}, () => 1);
    const logger = captureLogger();
    const client = createClient({ url: server.url, prefix: `outage:${randomBytes(4).toString('hex')}`, registry, logger });
    try {
      const handle = await client.runByName('w', {});
      await server.kill();
      // The connection's own error (ECONNREFUSED on reconnect) tells the client Redis is down.
      await eventually(() => !client.health.healthy, 5_000);
      const call = await timed(client.getRun(handle.id));
      expect(call.error).toBeInstanceOf(RedisUnavailableError);
      expect((call.error as Error).message).toContain('the connection is down');
      expect(call.ms).toBeLessThan(200);
      await server.restart();
      await eventually(async () => (await client.getRun(handle.id).catch(() => null))?.id === handle.id, 10_000);
    } finally {
      await client.close();
      await server.stop();
    }
  }, 30_000);
});

describe('Redis paused under a running worker', () => {
  it('the worker logs once when Redis stops answering and once when it answers again, and the run completes', async () => {
    const server = await OwnRedis.start();
    const registry = new WorkflowRegistry();
    const gate = deferred();
    let second = 0;
    const wf = registry.define('w', {}, async ({ step }) => {
      await step.run('first', () => gate.promise);
      await step.run('second', () => ++second);
      return 'done';
    });
    const logger = captureLogger();
    const client = createClient({ url: server.url, prefix: `pause:${randomBytes(4).toString('hex')}`, registry, logger, commandTimeoutMs: 500 });
    const worker = await startWorker({ app: 'pause', client, registry, concurrency: 2, runtime: FAST_RUNTIME, logger });
    try {
      const handle = await client.start(wf, {});
      await eventually(async () => (await client.getRunSteps(handle.id)).length === 0 && (await client.getRun(handle.id))?.status === 'running');
      server.pause();
      gate.resolve();
      await eventually(() => logger.lines.some((l) => l.includes('is unreachable')), 5_000);
      await sleep(1_000);
      server.resume();
      expect(await handle.result({ timeoutMs: 10_000 })).toBe('done');
      expect(second).toBe(1);
      expect(logger.lines.filter((l) => l.includes('is unreachable'))).toHaveLength(1);
      await eventually(() => logger.lines.some((l) => l.includes('is reachable again after')), 6_000);
      expect(logger.lines.filter((l) => l.includes('is reachable again after'))).toHaveLength(1);
    } finally {
      server.resume();
      await worker.stop({ timeoutMs: 1000 });
      await client.close();
      await server.stop();
    }
  });
});
