import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

import { ConfigurationError } from '../../lib/core';
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

  it('stops its redis-server when the process that started it is killed without closing it', async () => {
    const script = `
      const { createTestEngine } = require('./lib/testing/core');
      const engine = createTestEngine();
      console.log(JSON.stringify({ pid: engine.server.pid, socket: engine.server.socket }));
      setInterval(() => undefined, 1000);`;
    const env: NodeJS.ProcessEnv = { ...process.env };
    delete env.REDIS_URL;
    const child = spawn(process.execPath, ['-r', '@swc-node/register', '-e', script], {
      cwd: join(__dirname, '..', '..'),
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0]);
      });
      child.once('exit', (code) => reject(new Error(`the child exited (${code}) before starting its engine`)));
    });
    const server = JSON.parse(line) as { pid: number; socket: string };
    expect(isAlive(server.pid)).toBe(true);
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    // Its watchdog notices within half a second, stops the server and deletes its directory.
    const deadline = Date.now() + 10_000;
    while ((isAlive(server.pid) || existsSync(server.socket)) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(isAlive(server.pid)).toBe(false);
    expect(existsSync(server.socket)).toBe(false);
  }, 30_000);

  it('refuses an unknown option, naming it and the fix', () => {
    expect(() => createTestEngine({ registry: {} } as never)).toThrow(ConfigurationError);
    expect(() => createTestEngine({ registry: {} } as never)).toThrow(
      'Unknown option "registry" in createTestEngine options. The engine has a registry of its own: define workflows with engine.define(...) or engine.registry.define(...). Known options: redis, url, prefix, codec.',
    );
    expect(() => createTestEngine({ prefx: 'a' } as never)).toThrow('Unknown option "prefx" in createTestEngine options. Did you mean "prefix"?');
  });
});
