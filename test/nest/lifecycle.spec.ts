import { createAdmin } from '../../lib';

import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { Injectable, Module, type INestApplicationContext, type LoggerService, type Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { Test } from '@nestjs/testing';

import {
  ConfigurationError,
  createClient,
  RedflowClient,
  RedflowModule,
  Step,
  Workflow,
  type RedflowModuleOptions,
  type RedisConnection,
  type RunStatus,
  type WorkflowClient,
  type WorkflowContext,
} from '../../lib';
import { RedflowServer } from '../../lib/microservice';
import { RedflowOrchestrator } from '../../lib/nest/redflow.orchestrator';
import { connect, deferred, eventually, FAST_RUNTIME } from '../support/engine';

/**
 * The Nest lifecycle of RedflowModule on real Nest apps and the test Redis: when the worker starts
 * (bootstrap, or listen of a RedflowServer microservice), how shutdown drains it, producer-only
 * apps and the shutdown-hooks warning.
 */

const APP = 'lifecycle-app';

/** Holds the `slow` workflow until opened; lets the test know when the handler entered it. */
class Gate {
  private readonly opened = deferred();
  private readonly entry = deferred();

  static open(): Gate {
    const gate = new Gate();
    gate.release();
    return gate;
  }

  /** Resolves once a handler waits at the gate. */
  get entered(): Promise<void> {
    return this.entry.promise;
  }

  release(): void {
    this.opened.resolve();
  }

  /** Waits until released; a run's aborted signal (cancel, abandon on shutdown) ends the wait. */
  async pass(signal: AbortSignal): Promise<void> {
    this.entry.resolve();
    await Promise.race([
      this.opened.promise,
      new Promise<never>((_, reject) => {
        if (signal.aborted) reject(signal.reason);
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
    ]);
  }
}

/** A plain service whose `@Step` method becomes a durable step when a workflow calls it. */
@Injectable()
class Greeter {
  @Step()
  async greet(name: string): Promise<string> {
    return `Hello, ${name}!`;
  }
}

@Injectable()
class LifecycleWorkflows {
  constructor(
    private readonly greeter: Greeter,
    private readonly gate: Gate,
  ) {}

  @Workflow()
  async greet(ctx: WorkflowContext<{ name: string }>): Promise<string> {
    return this.greeter.greet(ctx.input.name);
  }

  @Workflow()
  async slow(ctx: WorkflowContext<{ label: string }>): Promise<string> {
    await this.gate.pass(ctx.signal);
    return `done ${ctx.input.label}`;
  }
}

/** Collects what the app logs, with the context Nest passes along. */
class CapturingLogger implements LoggerService {
  readonly entries: Array<{ level: string; message: string; context?: string }> = [];
  private record(level: string, message: unknown, params: unknown[]): void {
    const context = params.length ? String(params[params.length - 1]) : undefined;
    this.entries.push({ level, message: String(message), context });
  }
  log(message: unknown, ...params: unknown[]): void {
    this.record('log', message, params);
  }
  warn(message: unknown, ...params: unknown[]): void {
    this.record('warn', message, params);
  }
  error(message: unknown, ...params: unknown[]): void {
    this.record('error', message, params);
  }
  debug(message: unknown, ...params: unknown[]): void {
    this.record('debug', message, params);
  }
  verbose(message: unknown, ...params: unknown[]): void {
    this.record('verbose', message, params);
  }
  fatal(message: unknown, ...params: unknown[]): void {
    this.record('fatal', message, params);
  }
}

let prefix: string;
let redis: RedisConnection;
let readerRedis: RedisConnection;
/** A client of its own (no Nest), to observe runs independently of the app under test. */
let reader: WorkflowClient;
const openApps = new Set<INestApplicationContext>();

beforeEach(() => {
  prefix = `test:nest-lifecycle:${randomBytes(5).toString('hex')}`;
  redis = connect();
  readerRedis = connect();
  reader = createClient({ redis: readerRedis, prefix });
});

afterEach(async () => {
  for (const app of openApps) await app.close();
  openApps.clear();
  await createAdmin(reader).resetState();
  await reader.close();
  await readerRedis.quit();
  await redis.quit();
});

/** A fresh root module per app: RedflowModule on this test's prefix plus the workflow providers. */
function appModule(options: Partial<RedflowModuleOptions> = {}, gate: Gate = Gate.open()): Type {
  @Module({
    imports: [
      RedflowModule.forRoot({
        app: APP,
        connection: redis,
        prefix,
        worker: { concurrency: 2, runtime: FAST_RUNTIME },
        ...options,
      }),
    ],
    providers: [Greeter, LifecycleWorkflows, { provide: Gate, useValue: gate }],
  })
  class LifecycleTestModule {}
  return LifecycleTestModule;
}

/** A Nest app from Test.createTestingModule, tracked so afterEach closes it if a test fails. */
async function testingApp(module: Type, logger?: LoggerService) {
  const builder = Test.createTestingModule({ imports: [module] });
  if (logger) builder.setLogger(logger);
  const app = (await builder.compile()).createNestApplication();
  return track(app);
}

function track<T extends INestApplicationContext>(app: T): T {
  openApps.add(app);
  return app;
}

async function close(app: INestApplicationContext): Promise<void> {
  openApps.delete(app);
  await app.close();
}

async function statusOf(id: string): Promise<RunStatus | undefined> {
  return (await reader.getRun(id))?.status;
}

/**
 * Asserts that a run stays queued: no worker claims it. A non-event cannot be awaited, so this
 * watches for a bounded time instead: 300 ms is three times the workers' blockTimeoutMs (100 ms),
 * and a running worker claims a queued run right away (its blocking wait wakes on the new run).
 */
async function expectStaysQueued(id: string, ms = 300): Promise<void> {
  const until = Date.now() + ms;
  do {
    expect(await statusOf(id)).toBe('queued');
    await new Promise((resolve) => setTimeout(resolve, 20));
  } while (Date.now() < until);
  expect(await statusOf(id)).toBe('queued');
}

describe('RedflowServer microservice', () => {
  it('starts the worker on listen(), not on init(), and stops it on close()', async () => {
    const app = track(await NestFactory.createMicroservice(appModule(), { strategy: new RedflowServer(), logger: false }));
    await app.init();
    const client = app.get(RedflowClient);
    const orchestrator = app.get(RedflowOrchestrator);

    const handle = await client.run(LifecycleWorkflows, 'greet', { name: 'Ada' });
    // Bootstrap registered the workflows but, with a RedflowServer attached, left the worker to listen().
    expect((await reader.listWorkflows()).map((w) => w.name)).toEqual(['LifecycleWorkflows.greet', 'LifecycleWorkflows.slow']);
    expect(orchestrator.runningWorker).toBeUndefined();
    await expectStaysQueued(handle.id);

    await app.listen();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('Hello, Ada!');
    // The injected service's @Step method ran as a durable step of the run.
    expect((await reader.getRunSteps(handle.id)).map((s) => [s.name, s.status, s.output])).toEqual([['greet', 'succeeded', 'Hello, Ada!']]);
    const worker = orchestrator.runningWorker;
    expect(worker?.claiming).toBe(true);

    await close(app);
    expect(worker?.claiming).toBe(false);
    const later = await reader.runByName('LifecycleWorkflows.greet', { name: 'Bob' });
    await expectStaysQueued(later.id);
    // A connection passed as an ioredis instance belongs to the caller: the module leaves it open.
    expect(redis.status).toBe('ready');
  });

  it('initializes and starts the worker on listen() alone (no init() first)', async () => {
    const app = track(await NestFactory.createMicroservice(appModule(), { strategy: new RedflowServer(), logger: false }));
    await app.listen();
    const handle = await app.get(RedflowClient).run(LifecycleWorkflows, 'greet', { name: 'Edsger' });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('Hello, Edsger!');
    const worker = app.get(RedflowOrchestrator).runningWorker;
    expect(worker?.claiming).toBe(true);
    await close(app);
    expect(worker?.claiming).toBe(false);
  });

  it("a hybrid app in the order of Nest's docs: startAllMicroservices() before init() starts the worker once the app is initialized", async () => {
    const url = process.env.REDFLOW_TEST_REDIS_URL;
    if (!url) throw new Error('The jest global setup did not start Redis.');
    const app = track(await NestFactory.create(appModule({ connection: url }), { logger: false }));
    app.connectMicroservice({ strategy: new RedflowServer() });
    await app.startAllMicroservices();
    const orchestrator = app.get(RedflowOrchestrator);
    expect(orchestrator.runningWorker).toBeUndefined();
    await app.init();
    const handle = await app.get(RedflowClient).run(LifecycleWorkflows, 'greet', { name: 'Barbara' });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('Hello, Barbara!');
    expect(orchestrator.runningWorker?.claiming).toBe(true);
    await close(app);
  });

  it('runs the worker in a hybrid app once startAllMicroservices() listens', async () => {
    const url = process.env.REDFLOW_TEST_REDIS_URL;
    if (!url) throw new Error('The jest global setup did not start Redis.');
    const app = track(await NestFactory.create(appModule({ connection: url }), { logger: false }));
    app.connectMicroservice({ strategy: new RedflowServer() });
    await app.init();
    const client = app.get(RedflowClient);
    const orchestrator = app.get(RedflowOrchestrator);

    const handle = await client.run(LifecycleWorkflows, 'greet', { name: 'Grace' });
    expect(orchestrator.runningWorker).toBeUndefined();
    await expectStaysQueued(handle.id);

    await app.startAllMicroservices();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('Hello, Grace!');
    const worker = orchestrator.runningWorker;
    expect(worker?.claiming).toBe(true);

    await close(app);
    expect(worker?.claiming).toBe(false);
    // A connection the module opened from a URL is the module's to close.
    // (quit() resolves on Redis's OK; the socket closes a moment later.)
    await eventually(() => client.redis.status === 'end', 2_000);
  });

  it('rejects listen() with a ConfigurationError when the app does not import RedflowModule', async () => {
    @Module({})
    class WithoutRedflowModule {}
    const app = track(await NestFactory.createMicroservice(WithoutRedflowModule, { strategy: new RedflowServer(), logger: false }));

    const error: unknown = await app.listen().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message.startsWith('RedflowServer found no RedflowModule')).toBe(true);
    await close(app);
  });
});

describe('graceful shutdown', () => {
  it('drains a running workflow before the app closes', async () => {
    const gate = new Gate();
    const app = await testingApp(appModule({ shutdownTimeoutMs: 5_000 }, gate));
    await app.init();
    const handle = await app.get(RedflowClient).run(LifecycleWorkflows, 'slow', { label: 'drained' });
    await gate.entered;
    expect(await statusOf(handle.id)).toBe('running');

    let closed = false;
    const closing = close(app).then(() => (closed = true));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // Still draining: close() waits for the handler.
    expect(closed).toBe(false);
    gate.release();
    await closing;

    const run = await reader.getRun(handle.id);
    expect(run?.status).toBe('succeeded');
    expect(run?.output).toBe('done drained');
  });

  it('leaves a run that outlives shutdownTimeoutMs to another worker, which completes it', async () => {
    const stuck = new Gate();
    const first = await testingApp(appModule({ shutdownTimeoutMs: 100 }, stuck));
    await first.init();
    const handle = await first.get(RedflowClient).run(LifecycleWorkflows, 'slow', { label: 'resumed' });
    await stuck.entered;

    const startedClosing = Date.now();
    await close(first);
    expect(Date.now() - startedClosing).toBeLessThan(2_000);
    // Not failed, not re-queued by this app: still running under a lease nobody renews.
    expect(await statusOf(handle.id)).toBe('running');

    const second = await testingApp(appModule({}, Gate.open()));
    await second.init();
    // Once the 1 s lease expires, the second app's reaper recovers the run and its worker finishes it.
    await expect(reader.handle(handle.id).result({ timeoutMs: 5_000 })).resolves.toBe('done resumed');
    expect(await statusOf(handle.id)).toBe('succeeded');
    await close(second);
  });
});

describe('producer-only app (worker: false)', () => {
  it('registers its workflows but never claims a run', async () => {
    const app = await testingApp(appModule({ worker: false }));
    await app.init();
    expect(app.get(RedflowOrchestrator).runningWorker).toBeUndefined();

    const handle = await app.get(RedflowClient).run(LifecycleWorkflows, 'greet', { name: 'Linus' });
    await expectStaysQueued(handle.id);

    const workflows = await reader.listWorkflows();
    expect(workflows.map(({ name, owner, queue }) => ({ name, owner, queue }))).toEqual([
      { name: 'LifecycleWorkflows.greet', owner: APP, queue: 'default' },
      { name: 'LifecycleWorkflows.slow', owner: APP, queue: 'default' },
    ]);
    await close(app);
    expect(await statusOf(handle.id)).toBe('queued');
  });
});

describe('shutdown hooks warning', () => {
  const warning = (logger: CapturingLogger) => logger.entries.filter((e) => e.level === 'warn' && e.message.includes('Shutdown hooks are not enabled'));

  it('warns, with context Redflow, when an app that runs a worker has no SIGTERM listener', async () => {
    expect(process.listenerCount('SIGTERM')).toBe(0);
    const logger = new CapturingLogger();
    const app = await testingApp(appModule(), logger);
    await app.init();

    expect(warning(logger)).toEqual([expect.objectContaining({ context: 'Redflow' })]);
    expect(warning(logger)[0].message).toContain('app.enableShutdownHooks()');
    await close(app);
  });

  it('does not warn in a producer-only app: it has no running workflows to drain', async () => {
    const logger = new CapturingLogger();
    const app = await testingApp(appModule({ worker: false }), logger);
    await app.init();

    expect(logger.entries.some((e) => e.context === 'Redflow' && e.message.startsWith('Registered 2 workflow(s)'))).toBe(true);
    expect(warning(logger)).toEqual([]);
    await close(app);
  });

  it('does not warn when app.enableShutdownHooks() was called before init', async () => {
    const logger = new CapturingLogger();
    const app = await testingApp(appModule({ worker: false }), logger);
    app.enableShutdownHooks();
    await app.init();

    // The app's own log went through the capturing logger: the check is not vacuous.
    expect(logger.entries.some((e) => e.context === 'Redflow' && e.message.startsWith('Registered 2 workflow(s)'))).toBe(true);
    expect(warning(logger)).toEqual([]);
    await close(app);
    expect(process.listenerCount('SIGTERM')).toBe(0);
  });
});
