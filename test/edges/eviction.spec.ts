import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { Injectable, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { ConfigurationError, createClient, RedflowModule, startWorker, Workflow, WorkflowRegistry, type RedflowLogger, type WorkflowClient } from '../../lib';
import { OwnRedis } from '../support/own-redis';

function captureLogger(): RedflowLogger & { lines: string[] } {
  const lines: string[] = [];
  return { lines, log: () => undefined, warn: (m) => lines.push(m), error: (m) => lines.push(m) };
}

const prefix = () => `evict:${randomBytes(4).toString('hex')}`;

describe('a Redis whose maxmemory-policy may evict keys', () => {
  let server: OwnRedis;
  const clients: WorkflowClient[] = [];

  beforeAll(async () => {
    server = await OwnRedis.start(['--maxmemory-policy', 'allkeys-lru']);
    // A user that may not run CONFIG, as on managed Redis: the policy is read from INFO memory.
    server.cli('ACL', 'SETUSER', 'app', 'on', '>secret', '~*', '&*', '+@all', '-config');
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close();
  });

  afterAll(async () => {
    await server.stop();
  });

  function client(options: { url?: string; requireNoEviction?: boolean; logger?: RedflowLogger } = {}): WorkflowClient {
    const c = createClient({ url: server.url, prefix: prefix(), registry: new WorkflowRegistry(), ...options });
    clients.push(c);
    return c;
  }

  it('warns once, on the first call, naming the policy, the risk and the fix', async () => {
    const logger = captureLogger();
    const c = client({ logger });
    expect(await c.getRun('nope')).toBeNull();
    expect(await c.listRuns()).toEqual([]);
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]).toBe(
      `Redis at 127.0.0.1:${server.port} has maxmemory-policy "allkeys-lru": when it fills up it deletes keys, and with them workflow runs, steps and the workflow registry, without a trace. Set maxmemory-policy to noeviction (CONFIG SET maxmemory-policy noeviction, redis.conf, or your provider's parameter group). Pass requireNoEviction: true (in Nest: redis: { requireNoEviction: true }) to refuse to start instead of this warning.`,
    );
  });

  it('reads the policy from INFO memory when CONFIG is forbidden', async () => {
    const logger = captureLogger();
    const c = client({ url: `redis://app:secret@127.0.0.1:${server.port}`, logger });
    await c.listWorkflows();
    expect(logger.lines).toHaveLength(1);
    expect(logger.lines[0]).toContain('has maxmemory-policy "allkeys-lru"');
    // The password never appears in what is logged.
    expect(logger.lines[0]).not.toContain('secret');
  });

  it('with requireNoEviction, a worker refuses to start and client calls fail with ConfigurationError', async () => {
    const logger = captureLogger();
    const c = client({ requireNoEviction: true, logger });
    const registry = new WorkflowRegistry();
    registry.define('w', {}, () => 1);
    const error = await startWorker({ app: 'evict', client: c, registry }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('has maxmemory-policy "allkeys-lru"');
    expect((error as Error).message).toContain('requireNoEviction is on, so this client refuses to use it.');
    await expect(c.getRun('nope')).rejects.toBeInstanceOf(ConfigurationError);
    // Nothing was registered.
    expect(await c.redis.keys(`${c.keys.base}*`)).toEqual([]);
    expect(logger.lines).toEqual([]);
  });

  it('says nothing for noeviction', async () => {
    const quiet = await OwnRedis.start(['--maxmemory-policy', 'noeviction']);
    try {
      const logger = captureLogger();
      const c = createClient({ url: quiet.url, prefix: prefix(), registry: new WorkflowRegistry(), logger });
      clients.push(c);
      await c.listRuns();
      expect(logger.lines).toEqual([]);
    } finally {
      for (const c of clients.splice(0)) await c.close();
      await quiet.stop();
    }
  });

  it('in Nest, redis: { requireNoEviction: true } fails the app at startup', async () => {
    @Injectable()
    class Jobs {
      @Workflow('evict.job')
      job() {
        return 1;
      }
    }
    @Module({
      imports: [RedflowModule.forRoot({ app: 'evict', connection: server.url, prefix: prefix(), redis: { requireNoEviction: true } })],
      providers: [Jobs],
    })
    class AppModule {}
    const moduleRef = await Test.createTestingModule({ imports: [AppModule] }).compile();
    const app = moduleRef.createNestApplication({ logger: false });
    const error = await app.init().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toContain('maxmemory-policy "allkeys-lru"');
    await app.close();
  });
});
