import { randomBytes } from 'node:crypto';
import type { INestApplication, LogLevel, ModuleMetadata } from '@nestjs/common';
import type { AbstractHttpAdapter } from '@nestjs/core';
import { Test } from '@nestjs/testing';

import { createAdmin, createClient, type RedisConnection } from '../../lib';
import { connect } from './engine';

/** How a test's Nest app is created. */
export interface NestAppOptions {
  /** Nest's logger levels. @default false (silent) */
  logger?: false | LogLevel[];
  /** The HTTP adapter, e.g. `new FastifyAdapter()`. @default Express */
  adapter?: AbstractHttpAdapter;
}

/** Compiles a testing module from `metadata` and creates its app, not yet initialised (`app.init()`). */
export async function createNestApp(metadata: ModuleMetadata, options: NestAppOptions = {}): Promise<INestApplication> {
  const module = await Test.createTestingModule(metadata).compile();
  const logger = options.logger ?? false;
  return options.adapter ? module.createNestApplication(options.adapter, { logger }) : module.createNestApplication({ logger });
}

/** A Fastify app answers only once Fastify itself is ready, after `app.init()`. */
export async function fastifyReady(app: INestApplication): Promise<void> {
  await (app.getHttpAdapter().getInstance() as { ready(): Promise<void> }).ready();
}

/**
 * One Nest app per test on the test Redis: a connection for the whole file, a fresh key prefix
 * before each test, and after each test the app closed and every key of its prefix deleted.
 */
export class NestAppPerTest {
  readonly redis: RedisConnection = connect();
  /** This test's key prefix: `test:<name>:<random>`. */
  prefix = '';
  /** The app `start` created, until the test ends (a test that closes it itself sets it back to undefined). */
  app: INestApplication | undefined;

  /**
   * Creates and initialises the app. It is kept before `init()` runs, so an app whose startup
   * fails is still closed after the test.
   */
  async start(metadata: ModuleMetadata, options: NestAppOptions = {}): Promise<INestApplication> {
    const app = await createNestApp(metadata, options);
    this.app = app;
    await app.init();
    return app;
  }
}

/** Registers the hooks of a `NestAppPerTest` in the calling `describe`; prefixes start with `test:<name>:`. */
export function nestAppPerTest(name: string): NestAppPerTest {
  const nest = new NestAppPerTest();
  beforeEach(() => {
    nest.prefix = `test:${name}:${randomBytes(4).toString('hex')}`;
  });
  afterEach(async () => {
    await nest.app?.close();
    nest.app = undefined;
    await createAdmin(createClient({ redis: nest.redis, prefix: nest.prefix })).resetState();
  });
  afterAll(() => nest.redis.quit());
  return nest;
}
