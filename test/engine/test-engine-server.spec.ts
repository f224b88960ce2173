import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

import { createTestEngine, RedisServerNotFoundError } from '../../lib/testing/core';
import { isAlive } from '../../lib/testing/redis-server';

/** `createTestEngine()` without any Redis given starts a redis-server of its own and stops it. */
describe('createTestEngine without REDIS_URL', () => {
  const saved = process.env.REDIS_URL;
  beforeAll(() => delete process.env.REDIS_URL);
  afterAll(() => {
    if (saved !== undefined) process.env.REDIS_URL = saved;
  });

  it('starts its own redis-server, runs a workflow on it, and stops it on close', async () => {
    const engine = createTestEngine();
    const server = engine.server!;
    expect(server).toBeDefined();
    expect(isAlive(server.pid)).toBe(true);
    const wf = engine.define('hello', {}, ({ step, input }) => step.run('greet', () => `hello ${(input as { name: string }).name}`));
    const result = await engine.run(wf, { name: 'ada' });
    expect(result).toMatchObject({ status: 'succeeded', output: 'hello ada' });
    expect(await engine.redis.ping()).toBe('PONG');
    await engine.close();
    expect(isAlive(server.pid)).toBe(false);
  });

  it('without a redis-server binary on PATH, fails at once with RedisServerNotFoundError naming how to install one', () => {
    // A child process: jest's process.env is a copy, so the PATH the library's spawn sees is changed only there.
    const script = `
      const { createTestEngine } = require('./lib/testing/core');
      try { createTestEngine(); console.log('started'); process.exit(0); }
      catch (error) { console.log(JSON.stringify({ name: error.name, message: error.message })); }`;
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: '/nonexistent-redflow-bin' };
    delete env.REDIS_URL;
    const out = execFileSync(process.execPath, ['-r', '@swc-node/register', '-e', script], {
      cwd: join(__dirname, '..', '..'),
      env,
      encoding: 'utf8',
      timeout: 20_000,
    });
    const error = JSON.parse(out.trim().split('\n').pop()!) as { name: string; message: string };
    expect(error.name).toBe(RedisServerNotFoundError.name);
    expect(error.message).toMatch(/no redis-server binary and no REDIS_URL.*apt-get install -y redis-server.*brew install redis.*REDIS_URL/);
  });
});
