import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { Injectable, Module, type INestApplicationContext, type LoggerService } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';

import { RedflowClient, RedflowModule, RedisUnavailableError, Step, Workflow, type RedflowModuleOptions, type WorkflowContext } from '../../lib';
import { eventually, FAST_RUNTIME } from '../support/engine';
import { OwnRedis } from '../support/own-redis';

/**
 * An app whose Redis is down when it starts: one error line, then it either starts and registers
 * its workflows once Redis answers (`redis.waitAtStartup`, the default), or fails its bootstrap.
 */

@Injectable()
class Greetings {
  @Workflow({ name: 'greet-later' })
  async greet({ input, step }: WorkflowContext<{ name: string }>) {
    await step.sleep('settle', 1);
    return this.compose(input.name);
  }

  @Step('compose')
  async compose(name: string) {
    return `hello ${name}`;
  }
}

/** Nest's logger, keeping what it was told. */
function captureLogger(): LoggerService & { errors: string[] } {
  const errors: string[] = [];
  return { errors, log: () => undefined, warn: () => undefined, error: (message: unknown) => errors.push(String(message)) };
}

describe('Redis unreachable when the app starts', () => {
  let server: OwnRedis;
  let app: INestApplicationContext | undefined;
  beforeEach(async () => {
    server = await OwnRedis.start([]);
    await server.kill();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    await server.stop();
  });

  const moduleWith = (redis: RedflowModuleOptions['redis']) => {
    @Module({
      imports: [
        RedflowModule.forRoot({
          app: 'startup-app',
          connection: server.url,
          prefix: `test:startup:${randomBytes(4).toString('hex')}`,
          redis,
          worker: { concurrency: 2, runtime: FAST_RUNTIME },
        }),
      ],
      providers: [Greetings],
    })
    class StartupModule {}
    return StartupModule;
  };

  it('by default, starts with one error line, then registers its workflows and runs them once Redis answers', async () => {
    const logger = captureLogger();
    const started = Date.now();
    app = await NestFactory.createApplicationContext(moduleWith(undefined), { logger, abortOnError: false });
    // It knows at once: the connection is refused, no command timeout is waited out.
    expect(Date.now() - started).toBeLessThan(5_000);
    const startup = logger.errors.filter((line) => line.includes('is unavailable at startup'));
    expect(startup).toHaveLength(1);
    expect(startup[0]).toContain('the app starts without it, and registers its workflows and starts its worker once Redis answers');
    await expect(app.get(RedflowClient).listWorkflows()).rejects.toThrow(RedisUnavailableError);

    await server.restart();
    const client = app.get(RedflowClient);
    await eventually(async () => (await client.listWorkflows().catch(() => [])).some((w) => w.name === 'greet-later'), 15_000);
    const run = await client.run(Greetings, 'greet', { name: 'ada' });
    await expect(run.result({ timeoutMs: 10_000 })).resolves.toBe('hello ada');
  }, 40_000);

  it('with redis: { waitAtStartup: false }, logs one error line and fails the bootstrap with RedisUnavailableError', async () => {
    const logger = captureLogger();
    // createApplicationContext initializes the app: its bootstrap is what fails.
    await expect(NestFactory.createApplicationContext(moduleWith({ waitAtStartup: false }), { logger, abortOnError: false })).rejects.toThrow(
      RedisUnavailableError,
    );
    const startup = logger.errors.filter((line) => line.includes('is unavailable at startup'));
    expect(startup).toHaveLength(1);
    expect(startup[0]).toContain('the app stops (redis.waitAtStartup is false)');
  }, 20_000);
});
