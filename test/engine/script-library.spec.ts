/**
 * The scripts as one Redis Functions library: loaded on first use, loaded again when Redis lost
 * it (restart without persistence, FUNCTION FLUSH), earlier builds' libraries deleted, and the
 * EVALSHA path kept for a Redis without FUNCTION (`REDFLOW_SCRIPT_MODE=eval` takes it here).
 * Each test has a redis-server of its own: flushing functions must not touch other test files.
 */
import { Redis } from 'ioredis';

import { loadLibrary } from '../../lib/core/store/scripts/script-loader';
import { RedflowTestEngine } from '../../lib/testing/core';
import { TestRedisServer } from '../../lib/testing/redis-server';
import { clusterMode } from '../support/engine';

const describeStandalone = clusterMode ? describe.skip : describe;

describeStandalone('the script library (Redis Functions)', () => {
  let server: TestRedisServer;
  let admin: Redis;
  let engine: RedflowTestEngine | undefined;

  beforeEach(() => {
    server = TestRedisServer.start();
    admin = new Redis({ path: server.socket });
  });
  afterEach(async () => {
    if (engine) {
      await engine.close();
      engine.redis.disconnect();
      engine = undefined;
    }
    admin.disconnect();
    await server.stop();
  });

  async function libraries(): Promise<string[]> {
    const listed = (await admin.call('FUNCTION', 'LIST')) as unknown[][];
    return listed.map((entry) => String(entry[entry.indexOf('library_name') + 1])).sort();
  }

  async function calls(command: string): Promise<number> {
    return Number(new RegExp(`^cmdstat_${command}:calls=(\\d+)`, 'm').exec(await admin.info('commandstats'))?.[1] ?? 0);
  }

  function newEngine(): RedflowTestEngine {
    engine = new RedflowTestEngine({ redis: new Redis({ path: server.socket }) });
    return engine;
  }

  it('is loaded on first use, replaces an earlier build’s library, and is loaded again after FUNCTION FLUSH', async () => {
    await admin.call('FUNCTION', 'LOAD', "#!lua name=redflow_0000000000000000\nredis.register_function('redflow_0000000000000000_x', function() return 1 end)");
    await admin.call('FUNCTION', 'LOAD', "#!lua name=other_app\nredis.register_function('other_app_x', function() return 1 end)");
    const e = newEngine();
    const wf = e.registry.define('double', { maxConcurrency: Infinity }, async ({ input, step }) => step.run('x', () => (input as number) * 2));
    await e.worker();
    await expect((await e.client.start(wf, 2)).result({ timeoutMs: 5_000 })).resolves.toBe(4);
    // Ours replaced the earlier build's; another app's library is left alone.
    expect(await libraries()).toEqual([loadLibrary().name, 'other_app'].sort());
    expect(await calls('fcall')).toBeGreaterThan(0);
    expect(await calls('evalsha')).toBe(0);

    await admin.call('FUNCTION', 'FLUSH');
    await expect((await e.client.start(wf, 5)).result({ timeoutMs: 5_000 })).resolves.toBe(10);
    expect(await libraries()).toEqual([loadLibrary().name]);
  });

  it('a user not allowed FCALL or FUNCTION gets the same scripts with EVALSHA', async () => {
    await admin.call('ACL', 'SETUSER', 'nofunctions', 'on', '>secret', '~*', '&*', '+@all', '-fcall', '-fcall_ro', '-function');
    engine = new RedflowTestEngine({ redis: new Redis({ path: server.socket, username: 'nofunctions', password: 'secret' }) });
    const wf = engine.registry.define('quadruple', { maxConcurrency: Infinity }, async ({ input, step }) => step.run('x', () => (input as number) * 4));
    await engine.worker();
    await expect((await engine.client.start(wf, 2)).result({ timeoutMs: 5_000 })).resolves.toBe(8);
    expect(await calls('evalsha')).toBeGreaterThan(0);
    expect(await libraries()).toEqual([]);
  });

  it('REDFLOW_SCRIPT_MODE=eval runs the same scripts with EVALSHA', async () => {
    const before = process.env.REDFLOW_SCRIPT_MODE;
    process.env.REDFLOW_SCRIPT_MODE = 'eval';
    try {
      const e = newEngine();
      const wf = e.registry.define('triple', { maxConcurrency: Infinity }, async ({ input, step }) => {
        const tripled = await step.run('x', () => (input as number) * 3);
        await step.sleep('pause', 1);
        return step.run('y', () => tripled + 1);
      });
      await e.worker();
      await expect((await e.client.start(wf, 2)).result({ timeoutMs: 5_000 })).resolves.toBe(7);
      expect(await calls('fcall')).toBe(0);
      expect(await calls('evalsha')).toBeGreaterThan(0);
      expect(await libraries()).toEqual([]);
    } finally {
      if (before === undefined) delete process.env.REDFLOW_SCRIPT_MODE;
      else process.env.REDFLOW_SCRIPT_MODE = before;
    }
  });
});
