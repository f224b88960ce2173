import { Inject, Injectable, type OnApplicationShutdown, type Type } from '@nestjs/common';
import { Reflector } from '@nestjs/core';

import type { Duration } from '../../core';
import { RedflowClient, type WorkflowInput, type WorkflowMethodName, type WorkflowOutput } from '../../nest';
import { RedflowMetadataAccessor } from '../../nest/redflow-metadata.accessor';
import type { TestRedisServer } from '../redis-server';
import type { StepMockOf, TestRunResult, WaitOptions } from '../test-runner';
import type { VirtualClock } from '../virtual-clock';
import { REDFLOW_TESTING_CONTEXT } from './redflow-testing.constants';
import type { RedflowTestingContext } from './redflow-testing.context';

/** Methods of `T` (candidates for `@Step` methods). */
type MethodName<T> = { [K in keyof T]-?: T[K] extends (...args: never[]) => unknown ? K : never }[keyof T] & string;

/**
 * Step mocks of a workflow class: keyed by a `@Step` method's name (its output type-checked
 * against the method's return type) or by any step name.
 */
export type WorkflowStepMocks<T> = { [K in MethodName<T>]?: T[K] extends (...args: never[]) => infer R ? StepMockOf<Awaited<R>> : never } & Record<
  string,
  StepMockOf
>;

/** Options of `RedflowTesting.run`. */
export interface RedflowTestingRunOptions<T> {
  /** Steps to mock: `@Step` method names or step names. */
  steps?: WorkflowStepMocks<T>;
  /** How long to wait for the run to end or wait, in real time. @default '5s' */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration such as `'5s'`, or ms); it goes in the next minor version. */
  timeoutMs?: number;
}

/**
 * Injected by tests of apps that import `RedflowTestingModule`: runs `@Workflow` methods with
 * steps mocked, moves the clock, sends signals and events, and waits for runs.
 */
@Injectable()
export class RedflowTesting implements OnApplicationShutdown {
  private readonly accessor: RedflowMetadataAccessor;

  constructor(
    @Inject(REDFLOW_TESTING_CONTEXT) private readonly context: RedflowTestingContext,
    /** The app's client (the one `RedflowModule` provides). */
    readonly client: RedflowClient,
    reflector: Reflector,
  ) {
    this.accessor = new RedflowMetadataAccessor(reflector);
  }

  /** The app's workflow time: `await testing.clock.advance('1h')`. */
  get clock(): VirtualClock {
    return this.context.clock;
  }

  /** The redis-server this module started (no `connection` nor `REDIS_URL` given), if any. */
  get redisServer(): TestRedisServer | undefined {
    return this.context.server;
  }

  /** The key prefix of this testing module's runs. */
  get prefix(): string {
    return this.context.prefix;
  }

  /**
   * Starts a run of the `@Workflow` method `method` and resolves when it ends or waits (status
   * `'waiting'`), with the given steps mocked.
   */
  run<T, K extends WorkflowMethodName<T>>(
    workflowClass: Type<T>,
    method: K,
    input: WorkflowInput<T, K>,
    options: RedflowTestingRunOptions<T> = {},
  ): Promise<TestRunResult<WorkflowOutput<T, K>>> {
    const steps: Record<string, StepMockOf> = {};
    for (const [key, mock] of Object.entries(options.steps ?? {})) {
      const method = (workflowClass.prototype as Record<string, unknown>)[key];
      const step = typeof method === 'function' ? this.accessor.getStep(method as () => unknown) : undefined;
      steps[step?.name ?? key] = mock as StepMockOf;
    }
    return this.context.runner.run(() => this.client.run(workflowClass, method, input), { steps, timeout: options.timeout, timeoutMs: options.timeoutMs });
  }

  /** Resolves when the run has ended or waits, with its state. */
  runUntilWaiting<TOutput = unknown>(runId: string, options: WaitOptions = {}): Promise<TestRunResult<TOutput>> {
    return this.context.runner.runUntilWaiting<TOutput>(runId, options);
  }

  /** Sends a signal to a run. */
  signal(runId: string, name: string, payload?: unknown): Promise<boolean> {
    return this.client.signal(runId, name, payload);
  }

  /** Emits an event; returns the ids of the runs it started. */
  emit(event: string, payload: unknown): Promise<string[]> {
    return this.client.emitEvent(event, payload);
  }

  /** Runs after every module's beforeApplicationShutdown, so the worker has stopped by then. */
  async onApplicationShutdown(): Promise<void> {
    await this.context.close();
  }
}
