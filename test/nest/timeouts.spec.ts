import 'reflect-metadata';

import { Injectable, type INestApplication } from '@nestjs/common';

import { ConfigurationError, currentStep, RedflowClient, RedflowModule, RunTimeoutError, Step, Workflow, type WorkflowContext } from '../../lib';
import { nestAppPerTest } from '../support/nest-app';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

@Injectable()
class ImportWorkflows {
  tries = 0;
  outsideRun: unknown = 'not called';

  @Workflow({ name: 'approval', timeout: 300 })
  async approval({ step }: WorkflowContext) {
    return step.waitForSignal('await-approval', 'approval');
  }

  @Workflow({ name: 'import' })
  async import(_ctx: WorkflowContext) {
    return this.importRows();
  }

  @Step({ name: 'import-rows', heartbeatTimeout: 200, retries: { maxAttempts: 2, delay: 10 } })
  async importRows(): Promise<string> {
    const step = currentStep()!;
    if (++this.tries === 1) {
      // Stops heartbeating: the heartbeat check aborts this try.
      await new Promise((resolve) => step.signal.addEventListener('abort', resolve));
      return 'never stored';
    }
    for (let i = 0; i < 6; i++) {
      await sleep(60);
      step.heartbeat();
    }
    return 'imported';
  }
}

/** `@Workflow({ timeout })` and `@Step({ heartbeatTimeout })` with `currentStep()`, in a Nest app on the test Redis. */
describe('timeouts in Nest', () => {
  const nest = nestAppPerTest('nest');
  const { redis } = nest;

  async function start(): Promise<INestApplication> {
    return nest.start({
      imports: [
        RedflowModule.forRoot({
          app: 'imports',
          connection: redis,
          prefix: nest.prefix,
          worker: { runtime: { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 } },
        }),
      ],
      providers: [ImportWorkflows],
    });
  }

  it('@Workflow({ timeout }) fails a waiting run with RunTimeoutError', async () => {
    const client = (await start()).get(RedflowClient);
    const handle = await client.run(ImportWorkflows, 'approval', {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toBeInstanceOf(RunTimeoutError);
    expect(await client.getRun(handle.id)).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'RunTimeoutError' } });
  });

  it('@Step({ heartbeatTimeout }) fails a try that stops calling currentStep().heartbeat(), and its retry succeeds', async () => {
    const nest = await start();
    const client = nest.get(RedflowClient);
    const workflows = nest.get(ImportWorkflows);
    const handle = await client.run(ImportWorkflows, 'import', {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('imported');
    expect(workflows.tries).toBe(2);
    expect((await client.getRunSteps(handle.id))[0]).toMatchObject({
      name: 'import-rows',
      status: 'succeeded',
      attempts: 2,
      lastError: { name: 'StepHeartbeatTimeoutError' },
    });
    // Outside a step there is nothing to heartbeat.
    expect(currentStep()).toBeUndefined();
  });

  it('refuses a bad heartbeatTimeout when the class is decorated', () => {
    const decorate = (decorator: MethodDecorator) => () => {
      class Jobs {
        work() {}
      }
      decorator(Jobs.prototype, 'work', Object.getOwnPropertyDescriptor(Jobs.prototype, 'work')!);
    };
    expect(decorate(Step({ heartbeatTimeout: 0 }))).toThrow(ConfigurationError);
    expect(decorate(Step({ heartbeatTimeout: 'abc' }))).toThrow('@Step heartbeatTimeout of Jobs.work must be a duration > 0');
    expect(decorate(Step({ heartbeatTimeout: '1s' }))).not.toThrow();
  });
});
