import 'reflect-metadata';

import { Injectable, type INestApplication } from '@nestjs/common';
import { Interval, Cron as ScheduleCron, ScheduleModule, SchedulerRegistry } from '@nestjs/schedule';

import { ConfigurationError, Cron, RedflowModule, Workflow, type WorkflowContext } from '../../lib';
import { nestAppPerTest } from '../support/nest-app';

class NightlyWithScheduleCron {
  @ScheduleCron('0 2 * * *')
  @Workflow('nightly-report')
  async nightly(_ctx: WorkflowContext) {
    return 'built';
  }
}

class PollerWithInterval {
  @Interval(1_000)
  @Workflow('poll')
  async poll(_ctx: WorkflowContext) {
    return 'polled';
  }
}

@Injectable()
class Reports {
  @Cron('0 0 3 * * *', { id: 'nightly-report', timezone: 'Europe/Paris' })
  @Workflow('nightly-report')
  async nightly(_ctx: WorkflowContext) {
    return 'built';
  }

  /** A job of @nestjs/schedule's own, next to ours. */
  @ScheduleCron('0 0 4 * * *', { name: 'local-cleanup' })
  cleanup(): void {}
}

/** `@nestjs/schedule` next to this library: its decorators refused on workflows, ours listed in its registry. */
describe('@nestjs/schedule interop', () => {
  const nest = nestAppPerTest('schedule');
  const { redis } = nest;

  async function start(providers: unknown[], imports: unknown[] = []): Promise<INestApplication> {
    return nest.start({
      imports: [RedflowModule.forRoot({ app: 'reports', connection: redis, prefix: nest.prefix }), ...imports] as never[],
      providers: providers as never[],
    });
  }

  it('refuses @Cron of @nestjs/schedule on a @Workflow at startup, naming Class.method, the cause and the one-line fix', async () => {
    const failure = await start([NightlyWithScheduleCron], [ScheduleModule.forRoot()]).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ConfigurationError);
    expect((failure as Error).message).toBe(
      'NightlyWithScheduleCron.nightly is a @Workflow with @Cron from @nestjs/schedule. That scheduler calls the method in every replica of the app, on its own timer and without a workflow context, so each tick would run it once per replica and fail. ' +
        "Use the distributed @Cron of nestjs-redflow instead, which starts one run per tick across all replicas: import { Cron } from 'nestjs-redflow' and write @Cron(\"0 2 * * *\", { id: 'NightlyWithScheduleCron.nightly' }).",
    );
  });

  it('refuses @Interval of @nestjs/schedule on a @Workflow too', async () => {
    await expect(start([PollerWithInterval], [ScheduleModule.forRoot()])).rejects.toThrow(
      /^PollerWithInterval\.poll is a @Workflow with @Interval from @nestjs\/schedule\./,
    );
  });

  it("lists our crons in SchedulerRegistry as jobs that never fire, next to the app's own", async () => {
    await start([Reports], [ScheduleModule.forRoot()]);
    const registry = nest.app!.get(SchedulerRegistry);
    expect([...registry.getCronJobs().keys()].sort()).toEqual(['local-cleanup', 'redflow:nightly-report']);
    const ours = registry.getCronJob('redflow:nightly-report');
    expect(ours.isActive).toBe(false);
    expect(ours.cronTime.source).toBe('0 0 3 * * *');
    expect(ours.nextDate().toUTC().toISO()).toEqual(expect.any(String));
    // The app's own job is started by ScheduleModule; ours is left stopped: nothing fires twice.
    expect(registry.getCronJob('local-cleanup').isActive).toBe(true);
  });

  it('without ScheduleModule, nothing is listed and nothing fails', async () => {
    await start([Reports]);
    expect(() => nest.app!.get(SchedulerRegistry)).toThrow();
  });
});
