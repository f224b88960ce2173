import { Module, type DynamicModule } from '@nestjs/common';

import { RedflowModule } from '../../nest';
import { RedflowTesting } from './redflow-testing';
import { REDFLOW_TESTING_CONTEXT } from './redflow-testing.constants';
import { RedflowTestingContext, type RedflowTestingOptions } from './redflow-testing.context';

/**
 * `RedflowModule` for tests: a real Redis (`connection`, `REDIS_URL`, or a redis-server it starts),
 * a prefix of its own, a `VirtualClock`, test timings and an in-process worker. Provides
 * `RedflowTesting` and (globally) `RedflowClient`. `app.close()` stops the worker, deletes the
 * prefix's keys and stops the redis-server it started.
 */
@Module({})
export class RedflowTestingModule {
  static forRoot(options: RedflowTestingOptions = {}): DynamicModule {
    // One context per forRoot call: two testing modules share nothing.
    const context = { provide: REDFLOW_TESTING_CONTEXT, useFactory: () => new RedflowTestingContext(options) };
    const contextModule: DynamicModule = { module: class RedflowTestingContextModule {}, providers: [context], exports: [REDFLOW_TESTING_CONTEXT] };
    return {
      module: RedflowTestingModule,
      imports: [
        contextModule,
        RedflowModule.forRootAsync({
          isGlobal: true,
          imports: [contextModule],
          inject: [REDFLOW_TESTING_CONTEXT],
          useFactory: (ctx: RedflowTestingContext) => ctx.moduleOptions(),
        }),
      ],
      providers: [RedflowTesting],
      exports: [RedflowTesting],
    };
  }
}
