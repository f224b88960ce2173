import { createTestEngine } from '../../lib/testing/core';
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
});
