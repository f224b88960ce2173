import {
  Inject,
  Injectable,
  Logger,
  type BeforeApplicationShutdown,
  type OnApplicationBootstrap,
  type OnApplicationShutdown,
  type OnModuleInit,
} from '@nestjs/common';
import { DiscoveryService, ModulesContainer } from '@nestjs/core';
import type { Subscription } from 'rxjs';

import { RedisUnavailableError, RUN_HOOK_EVENTS, startWorker, type Worker, type WorkerHooks, type WorkflowRegistry } from '../core';
import { resolveRedflowOptions, type RedflowModuleOptions, type ResolvedRedflowOptions } from './redflow-options.interface';
import { isRedflowWorkerTransport, type RedflowWorkerTransport } from './redflow-worker-transport.interface';
import { RedflowClient } from './redflow.client';
import { REDFLOW_LOGGER_CONTEXT, REDFLOW_REGISTRY } from './redflow.constants';
import { RedflowExplorer, type RunEventListener } from './redflow.explorer';
import { REDFLOW_MODULE_OPTIONS } from './redflow.module-definition';
import { listCronsInSchedulerRegistry } from './schedule-interop';

/**
 * Owns what runs: collects the workflows in onModuleInit, syncs them and starts the worker in
 * onApplicationBootstrap (or when a RedflowServer microservice listens), drains it in
 * beforeApplicationShutdown and closes the connection in onApplicationShutdown.
 */
@Injectable()
export class RedflowOrchestrator implements OnModuleInit, OnApplicationBootstrap, BeforeApplicationShutdown, OnApplicationShutdown {
  private readonly logger = new Logger(REDFLOW_LOGGER_CONTEXT);
  private readonly options: ResolvedRedflowOptions;
  private worker: Worker | undefined;
  private starting: Promise<void> | undefined;
  private server: RedflowWorkerTransport | undefined;
  private subscription: Subscription | undefined;
  private bootstrapped: Promise<void> | undefined;
  private listeners: RunEventListener[] = [];
  private explored = false;
  /** Set when the app shuts down: a bootstrap waiting for Redis gives up. */
  private shuttingDown = false;
  /** The RedflowServer listened before the app bootstrapped: the worker starts at bootstrap. */
  private listenedEarly = false;

  constructor(
    @Inject(REDFLOW_MODULE_OPTIONS) options: RedflowModuleOptions,
    private readonly client: RedflowClient,
    private readonly explorer: RedflowExplorer,
    @Inject(REDFLOW_REGISTRY) private readonly registry: WorkflowRegistry,
    private readonly modules: ModulesContainer,
    private readonly discovery: DiscoveryService,
  ) {
    this.options = resolveRedflowOptions(options);
    // A microservice created with RedflowServer registers it as an RPC target of the app: at
    // createMicroservice, or at connectMicroservice in a hybrid app, which may come before init().
    this.subscription = this.modules.getRpcTargetRegistry().subscribe((target) => {
      if (isRedflowWorkerTransport(target)) {
        this.server = target;
        target.attach(this);
      }
    });
  }

  /** The running worker, if this app runs one. */
  get runningWorker(): Worker | undefined {
    return this.worker;
  }

  onModuleInit(): void {
    // A microservice's init() and listen() may both run the init hooks: collect once.
    if (this.explored) return;
    this.explored = true;
    this.listeners = this.explorer.explore(this.registry);
  }

  onApplicationBootstrap(): Promise<void> {
    this.bootstrapped ??= this.bootstrapOrWait();
    return this.bootstrapped;
  }

  /**
   * Registers the workflows and starts the worker. With Redis unreachable: one error line, then
   * either the bootstrap fails (`redis.waitAtStartup: false`) or the app starts and the
   * registration is done in the background once Redis answers.
   */
  private async bootstrapOrWait(): Promise<void> {
    // Only a worker has runs to drain: a producer-only app needs no shutdown hooks of ours.
    if (this.options.worker.enabled && process.listenerCount('SIGTERM') === 0) {
      this.logger.warn(
        'Shutdown hooks are not enabled: on SIGTERM running workflows are not drained and are resumed only after their lease expires. Call app.enableShutdownHooks().',
      );
    }
    try {
      await this.bootstrap();
    } catch (error) {
      if (!(error instanceof RedisUnavailableError)) throw error;
      if (this.options.redis?.waitAtStartup === false) {
        this.logger.error(
          `Redis at ${error.address} is unavailable at startup (${error.detail}): the app stops (redis.waitAtStartup is false). Start Redis or fix the connection option.`,
        );
        // Nest does not shut down an app whose bootstrap failed: its connection must not keep the process alive.
        await this.client.close().catch(() => undefined);
        throw error;
      }
      this.logger.error(
        `Redis at ${error.address} is unavailable at startup (${error.detail}): the app starts without it, and registers its workflows${this.options.worker.enabled ? ' and starts its worker' : ''} once Redis answers. Client calls reject with RedisUnavailableError until then. Set redis: { waitAtStartup: false } to stop the app instead.`,
      );
      void this.bootstrapWhenRedisAnswers();
    }
  }

  /** Tries the bootstrap again each time Redis answers, until it succeeds or the app shuts down. */
  private async bootstrapWhenRedisAnswers(): Promise<void> {
    while (!this.shuttingDown) {
      await this.client.health.whenHealthy(() => this.shuttingDown);
      if (this.shuttingDown) return;
      try {
        await this.bootstrap();
        this.logger.log('Redis answers: the workflows are registered.');
        return;
      } catch (error) {
        if (!(error instanceof RedisUnavailableError)) {
          this.logger.error(`Registering the workflows failed: ${(error as Error).message}`, (error as Error).stack);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, 1_000).unref());
      }
    }
  }

  private async bootstrap(): Promise<void> {
    // A producer-only app may load fewer workflow providers than the workers sharing its `app`
    // id: it registers what it has but never removes what they registered.
    await this.client.syncRegistry(this.registry, {
      owner: this.options.app,
      defaultMaxConcurrency: this.options.defaults?.maxConcurrency,
      prune: this.options.worker.enabled,
    });
    this.logger.log(`Registered ${this.registry.list().length} workflow(s) for app "${this.options.app}".`);
    listCronsInSchedulerRegistry(this.discovery, this.registry, this.logger);
    if (!this.server || this.listenedEarly) await this.startWorker();
  }

  /**
   * Starts the worker unless it is disabled or already running. Called by `RedflowServer.listen`
   * before the app is initialized (a hybrid app's `startAllMicroservices()` before `listen()`,
   * as Nest's docs show), it starts the worker once the app has bootstrapped.
   */
  startWorker(): Promise<void> {
    const worker = this.options.worker;
    if (!worker.enabled) return Promise.resolve();
    if (!this.bootstrapped) {
      this.listenedEarly = true;
      return Promise.resolve();
    }
    this.starting ??= startWorker({
      app: this.options.app,
      client: this.client,
      registry: this.registry,
      queues: worker.queues,
      concurrency: worker.concurrency,
      runtime: worker.runtime,
      retention: worker.retention,
      retentionDays: worker.retentionDays,
      logFailedRuns: worker.logFailedRuns,
      journalWarningBytes: worker.journalWarningBytes,
      defaultMaxConcurrency: this.options.defaults?.maxConcurrency,
      defaultStepRetries: this.options.defaults?.stepRetries,
      logger: this.logger,
      hooks: this.hooks(),
      stepMocks: this.options.stepMocks,
    }).then((started) => {
      this.worker = started;
      this.logger.log(`Worker started on queue(s) ${started.queues.join(', ')} with concurrency ${started.concurrency}.`);
    });
    return this.starting;
  }

  /**
   * The worker's hooks: each calls the `@OnRunEvent` methods of its event (and workflow), each
   * on its own, so one that throws neither stops the others nor reaches the run.
   */
  private hooks(): WorkerHooks {
    const hooks: Record<string, (...args: unknown[]) => void> = {};
    for (const [event, hook] of Object.entries(RUN_HOOK_EVENTS)) {
      const listeners = this.listeners.filter((l) => l.event === event);
      if (!listeners.length) continue;
      hooks[hook] = (...args) => {
        const workflow = (args[0] as { workflow?: string } | undefined)?.workflow;
        for (const listener of listeners) {
          if (listener.workflows && (workflow === undefined || !listener.workflows.includes(workflow))) continue;
          const failed = (error: unknown) =>
            this.logger.error(
              `@OnRunEvent('${event}') ${listener.where} threw: ${(error as Error)?.message ?? String(error)}. The run is not affected.`,
              (error as Error)?.stack,
            );
          try {
            const result = listener.call(...args);
            if (result instanceof Promise) result.catch(failed);
          } catch (error) {
            failed(error);
          }
        }
      };
    }
    return hooks;
  }

  /** Stops claiming and lets running workflows finish, up to `shutdownTimeout`. */
  async stopWorker(): Promise<void> {
    await this.starting?.catch(() => undefined);
    await this.worker?.stop({ timeout: this.options.shutdownMs });
  }

  async beforeApplicationShutdown(): Promise<void> {
    this.shuttingDown = true;
    this.client.health.nudge();
    await this.stopWorker();
  }

  async onApplicationShutdown(): Promise<void> {
    const cleanups = [() => this.subscription?.unsubscribe(), () => this.stopWorker(), () => this.client.close()];
    for (const cleanup of cleanups) {
      try {
        await cleanup();
      } catch (error) {
        this.logger.error(`Shutdown step failed: ${(error as Error).message}`, (error as Error).stack);
      }
    }
  }
}
