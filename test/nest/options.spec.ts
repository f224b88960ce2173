import 'reflect-metadata';

import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';
import { Test } from '@nestjs/testing';

import { ConfigurationError, Cron, OnEvent, RedflowModule, Step, Workflow, type RedflowModuleOptions, type WorkflowContext } from '../../lib';
import { RedflowMetadataAccessor } from '../../lib/nest/redflow-metadata.accessor';
import { resolveRedflowOptions } from '../../lib/nest/redflow-options.interface';
import { nestAppPerTest } from '../support/nest-app';

/** The message of the ConfigurationError `fn` throws (decorating a class, for most tests here). */
function configError(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigurationError);
    return (error as Error).message;
  }
  throw new Error('expected a ConfigurationError, nothing was thrown');
}

// Decorators are plain functions: applying one to a method is what `@Decorator` does at class definition.
class Target {
  method(): void {}
}
const descriptor = () => Object.getOwnPropertyDescriptor(Target.prototype, 'method')!;
const decorate = (decorator: (target: Target, key: string, descriptor: PropertyDescriptor) => unknown) => decorator(Target.prototype, 'method', descriptor());

describe('@Workflow options', () => {
  it('throws at decoration for a misspelt option, suggesting the right one', () => {
    const message = configError(() => {
      class Billing {
        // @ts-expect-error the typo is the point of the test
        @Workflow({ maxAtempts: 3 })
        bill(_ctx: WorkflowContext<unknown>) {}
      }
      return Billing;
    });
    expect(message).toBe(
      'Unknown option "maxAtempts" in @Workflow options of Billing.bill. Did you mean "maxAttempts"? Known options: name, input, queue, version, onNonDeterminism, maxAttempts, retries, stepRetries, onFailure, maxConcurrency, debounce, throttle, rateLimit, mutex, concurrency, priority, batch, cancelOn, timeout.',
    );
  });

  it('checks nested option objects', () => {
    expect(configError(() => decorate(Workflow({ retries: { maxAttempts: 2, dealy: 10 } as never })))).toBe(
      'Unknown option "dealy" in retries of @Workflow options of Target.method. Did you mean "delay"? Known options: maxAttempts, delay, shouldRetry.',
    );
    expect(configError(() => decorate(Workflow({ debounce: { period: '1s', key: 'k', timout: '5s' } as never })))).toContain(
      'Unknown option "timout" in debounce of @Workflow options of Target.method. Did you mean "timeout"?',
    );
    expect(configError(() => decorate(Workflow({ throttle: { limit: 1, period: '1s', keys: 'k' } as never })))).toContain('Did you mean "key"?');
    expect(configError(() => decorate(Workflow({ rateLimit: { limit: 1, perid: '1s' } as never })))).toContain('Did you mean "period"?');
  });

  it('points options that belong to another decorator to it', () => {
    expect(configError(() => decorate(Workflow({ schema: {} } as never)))).toContain(
      'Unknown option "schema" in @Workflow options of Target.method. Pass the schema or DTO class as "input".',
    );
    expect(configError(() => decorate(Workflow({ cron: [] } as never)))).toContain('Add @Cron(expression) to the method instead.');
    expect(configError(() => decorate(Workflow({ event: [] } as never)))).toContain('Add @OnEvent(name) to the method instead.');
  });

  it('accepts every documented option', () => {
    expect(() =>
      decorate(
        Workflow({
          name: 'w',
          input: undefined,
          queue: 'q',
          maxAttempts: 2,
          retries: { maxAttempts: 2, delay: '1s', shouldRetry: () => true },
          onFailure: 'method',
          maxConcurrency: Infinity,
          debounce: { period: '1s', timeout: '5s', key: 'k' },
          throttle: { limit: 1, period: '1s', key: 'k' },
          rateLimit: { limit: 1, period: '1s' },
          mutex: 'm',
        }),
      ),
    ).not.toThrow();
    expect(() => decorate(Workflow('by-name'))).not.toThrow();
    expect(() => decorate(Workflow())).not.toThrow();
  });
});

describe('@Step options', () => {
  it('rejects a name with the reserved "#" or "|"', () => {
    const message = configError(() => {
      class Billing {
        @Step('charge#2')
        charge() {}
      }
      return Billing;
    });
    expect(message).toBe(
      '@Step name of Billing.charge must not contain "#" or "|", got "charge#2": "#" is reserved for the "#2" suffix of repeated calls and "|" separates stored fields; choose another character.',
    );
    expect(configError(() => decorate(Step({ name: 'a|b' })))).toContain('@Step name of Target.method must not contain "#" or "|", got "a|b"');
  });

  it('rejects an empty name, a name with a newline and an unknown option', () => {
    expect(configError(() => decorate(Step({ name: '' })))).toBe('@Step name of Target.method must be a non-empty string of at most 512 characters, got "".');
    expect(configError(() => decorate(Step('a\nb')))).toBe(
      '@Step name of Target.method must not contain control characters such as a newline or tab, got "a\\nb".',
    );
    expect(configError(() => decorate(Step({ name: 'charge', timout: 5 } as never)))).toBe(
      'Unknown option "timout" in @Step options of Target.method. Did you mean "timeout"? Known options: name, timeout, retries, heartbeatTimeout, compensate, compensateRetries, sandbox.',
    );
  });

  it('checks the deprecated timeoutMs as a duration', () => {
    for (const timeoutMs of [0, -1, NaN, Infinity, 1e20]) {
      expect(configError(() => decorate(Step({ timeoutMs })))).toBe(
        `@Step timeoutMs of Target.method must be a duration > 0 and at most 24 days (the longest Node.js timer) (a number of ms or a string like "5s"), got ${timeoutMs === 1e20 ? '100000000000000000000' : timeoutMs}.`,
      );
    }
    expect(() => decorate(Step({ name: 'charge', timeoutMs: 500 }))).not.toThrow();
  });

  it("checks timeout as a duration, '30s' or ms", () => {
    expect(configError(() => decorate(Step({ timeout: '0s' })))).toContain('@Step timeout of Target.method must be a duration > 0');
    expect(configError(() => decorate(Step({ timeout: 'soon' })))).toContain('got "soon"');
    expect(() => decorate(Step({ name: 'charge', timeout: '30s' }))).not.toThrow();
    expect(configError(() => decorate(Step({ name: 'charge', timeout: '30s', timeoutMs: 30_000 })))).toContain(
      '@Step timeout of Target.method and @Step timeoutMs of Target.method are the same option',
    );
  });
});

describe('@Cron options', () => {
  it('suggests "timezone" for "timeZone"', () => {
    const message = configError(() => {
      class Reports {
        // @ts-expect-error the typo is the point of the test
        @Cron('* * * * *', { timeZone: 'UTC' })
        nightly() {}
      }
      return Reports;
    });
    expect(message).toBe(
      'Unknown option "timeZone" in @Cron options of Reports.nightly. Did you mean "timezone"? Known options: id, timezone, input, missed, missedLimit, overlap, startAt, endAt, limit, priority.',
    );
  });

  it('rejects an expression in the options and a non-string expression', () => {
    expect(configError(() => decorate(Cron('* * * * *', { expression: '* * * * *' } as never)))).toContain(
      'Unknown option "expression" in @Cron options of Target.method. Pass the expression as the first argument of @Cron.',
    );
    expect(configError(() => decorate(Cron(undefined as never)))).toBe(
      '@Cron expression of Target.method must be a non-empty string, got undefined; use croner syntax, e.g. "0 9 * * 1-5", or { rrule } for an RFC 5545 rule.',
    );
    expect(() => decorate(Cron('0 9 * * 1-5', { id: 'morning', timezone: 'Europe/Paris', input: { a: 1 } }))).not.toThrow();
  });

  it("takes an RFC 5545 rule as { rrule }, recorded as the trigger's rrule; a rule that is not text, or one in the options, is refused", () => {
    const rrule = 'DTSTART;TZID=Europe/Paris:20270101T093000\nRRULE:FREQ=MONTHLY;BYDAY=MO;BYSETPOS=1';
    class Billing {
      @Cron({ rrule }, { id: 'first-monday', overlap: 'skip' })
      monthly() {}
    }
    expect(new RedflowMetadataAccessor(new Reflector()).getCrons(Billing.prototype.monthly)).toEqual([{ id: 'first-monday', overlap: 'skip', rrule }]);
    expect(configError(() => decorate(Cron({ rrule: 42 } as never)))).toBe(
      '@Cron rrule of Target.method must be RFC 5545 rule text starting with its DTSTART line, got 42.',
    );
    expect(configError(() => decorate(Cron('0 9 * * *', { rrule } as never)))).toContain(
      'Unknown option "rrule" in @Cron options of Target.method. Pass the rule as the first argument of @Cron: @Cron({ rrule }).',
    );
  });

  it('rejects an id starting with "@", the mark of runtime schedules', () => {
    expect(configError(() => decorate(Cron('0 9 * * 1-5', { id: '@morning' })))).toBe(
      '@Cron id of Target.method must not start with "@", got "@morning": that mark is kept for the schedules of client.schedule().',
    );
  });
});

describe('@OnEvent name', () => {
  it.each([
    ['', '""'],
    [undefined, 'undefined'],
    [42, '42'],
  ])('rejects %p', (name, text) => {
    expect(configError(() => decorate(OnEvent(name as never)))).toBe(
      `@OnEvent name of Target.method must be a non-empty string of at most 512 characters, got ${text}.`,
    );
  });

  it('accepts an event name', () => {
    expect(() => decorate(OnEvent('invoice.paid'))).not.toThrow();
  });
});

describe('RedflowModule options', () => {
  it('applies defaults', () => {
    expect(resolveRedflowOptions({ app: 'x' })).toMatchObject({ app: 'x', worker: { enabled: true, concurrency: 10 }, shutdownMs: 10_000 });
    expect(resolveRedflowOptions({ app: 'x', worker: false, shutdownTimeout: 0 })).toMatchObject({ worker: { enabled: false }, shutdownMs: 0 });
    expect(resolveRedflowOptions({ app: 'x', shutdownTimeout: '30s' })).toMatchObject({ shutdownMs: 30_000 });
    // The deprecated name still works, in ms.
    expect(resolveRedflowOptions({ app: 'x', shutdownTimeoutMs: 1_500 })).toMatchObject({ shutdownMs: 1_500 });
  });

  it('accepts every documented option', () => {
    const options: RedflowModuleOptions = {
      app: 'x',
      connection: 'redis://localhost:6379',
      prefix: 'redflow:eu',
      worker: {
        enabled: true,
        queues: ['default', 'emails'],
        concurrency: 3,
        retentionDays: 1,
        runtime: { leaseMs: 1000, heartbeatMs: 300, reaperIntervalMs: 100, blockTimeoutMs: 100, cleanupIntervalMs: 1000, maxRecoveries: 3 },
      },
      defaults: { maxConcurrency: Infinity },
      shutdownTimeoutMs: 5000,
      maxPayloadBytes: 1024,
      dashboard: { path: '/flows', authorize: () => true, readOnly: true },
      redis: { requireNoEviction: true },
      commandTimeoutMs: 5000,
    };
    expect(() => resolveRedflowOptions(options)).not.toThrow();
  });

  it.each<[string, Record<string, unknown>, string]>([
    [
      'a misspelt worker option',
      { app: 'x', worker: { concurency: 2 } },
      'Unknown option "concurency" in RedflowModule option "worker". Did you mean "concurrency"?',
    ],
    [
      'a misspelt runtime option',
      { app: 'x', worker: { runtime: { leaseMS: 1 } } },
      'Unknown option "leaseMS" in RedflowModule option "worker.runtime". Did you mean "leaseDuration"?',
    ],
    ['a misspelt defaults option', { app: 'x', defaults: { maxConcurency: 1 } }, 'Did you mean "maxConcurrency"?'],
    [
      'a misspelt dashboard option',
      { app: 'x', dashboard: { authorise: () => true } },
      'Unknown option "authorise" in RedflowModule option "dashboard". Did you mean "authorize"?',
    ],
    ['a misspelt redis option', { app: 'x', redis: { requireNoEvictions: true } }, 'Did you mean "requireNoEviction"?'],
    [
      'a missing app',
      { connection: 'redis://x' },
      'RedflowModule option "app" must be a non-empty string, a stable id of this app (the owner of its workflows in Redis), got undefined.',
    ],
    ['an empty app', { app: '' }, 'RedflowModule option "app" must be a non-empty string'],
    ['a prefix with a hash tag', { app: 'x', prefix: '{redflow}' }, 'RedflowModule option "prefix" must not contain "{" or "}", got "{redflow}"'],
    ['a prefix with a space', { app: 'x', prefix: 'red flow' }, 'RedflowModule option "prefix" must not contain whitespace, got "red flow"'],
    [
      'a negative shutdownTimeoutMs',
      { app: 'x', shutdownTimeoutMs: -1 },
      'RedflowModule option "shutdownTimeoutMs" must be a duration >= 0 and at most 24 days',
    ],
    ['a zero concurrency', { app: 'x', worker: { concurrency: 0 } }, 'RedflowModule option "worker.concurrency" must be an integer >= 1, got 0.'],
    ['a fractional concurrency', { app: 'x', worker: { concurrency: 1.5 } }, 'RedflowModule option "worker.concurrency" must be an integer >= 1, got 1.5.'],
    ['worker: true', { app: 'x', worker: true }, 'RedflowModule option "worker" must be false or an object such as { concurrency: 10 }, got true.'],
    ['a queue with "*"', { app: 'x', worker: { queues: ['a*'] } }, 'RedflowModule option "worker.queues[0]" must not contain "*"'],
    [
      'a zero defaults.maxConcurrency',
      { app: 'x', defaults: { maxConcurrency: 0 } },
      'RedflowModule option "defaults.maxConcurrency" must be an integer >= 1, or Infinity for no limit, got 0.',
    ],
    [
      'a zero defaults.stepRetries maxAttempts',
      { app: 'x', defaults: { stepRetries: { maxAttempts: 0 } } },
      'RedflowModule option "defaults.stepRetries" maxAttempts',
    ],
    [
      'a non-boolean requireNoEviction',
      { app: 'x', redis: { requireNoEviction: 'yes' } },
      'RedflowModule option "redis.requireNoEviction" must be true or false, got "yes".',
    ],
  ])('rejects %s', (_case, options, message) => {
    expect(configError(() => resolveRedflowOptions(options as unknown as RedflowModuleOptions))).toContain(message);
  });
});

@Injectable()
class Jobs {
  @Workflow('options-spec.job')
  async job() {
    return 'ok';
  }
}

describe('RedflowModule.forRoot', () => {
  const nest = nestAppPerTest('options');
  const { redis } = nest;

  it('fails to compile with a misspelt option, naming it and the right one', async () => {
    // The connection is this test's own, so the client the module built before failing is not left open.
    const options = { app: 'x', connection: redis, prefix: nest.prefix, wroker: {} } as unknown as RedflowModuleOptions;
    const compiling = Test.createTestingModule({ imports: [RedflowModule.forRoot(options)], providers: [Jobs] }).compile();
    await expect(compiling).rejects.toThrow(ConfigurationError);
    await expect(compiling).rejects.toThrow(
      'Unknown option "wroker" in RedflowModule options. Did you mean "worker"? Known options: app, connection, prefix, worker, defaults, shutdownTimeout, maxPayloadBytes, dashboard, redis, commandTimeout, clock, events, codec, tracing.',
    );
  });

  it('starts with valid options', async () => {
    await nest.start({
      imports: [
        RedflowModule.forRoot({
          app: 'x',
          connection: process.env.REDFLOW_TEST_REDIS_URL,
          prefix: nest.prefix,
          worker: false,
          redis: { requireNoEviction: false },
        }),
      ],
      providers: [Jobs],
    });
  });
});
