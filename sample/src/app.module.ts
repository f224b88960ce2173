import { Module, type DynamicModule } from '@nestjs/common';

import { RedflowModule } from '../../lib';
import { AnalyticsWorkflows } from './analytics/analytics.workflows';
import { CheckoutWorkflows } from './orders/checkout.workflows';
import { PaymentService } from './orders/payment.service';
import { RunsController } from './orders/runs.controller';

@Module({})
export class AppModule {
  /** `worker: false` for the HTTP entry (producer only); `true` for the worker entry. */
  static register(options: { worker: boolean }): DynamicModule {
    return {
      module: AppModule,
      imports: [
        RedflowModule.forRootAsync({
          // Routes are declared before the factory runs, so the async form names the path here too.
          dashboardPath: '/redflow',
          useFactory: () => ({
            app: 'sample-shop',
            connection: process.env.REDIS_URL,
            prefix: process.env.REDFLOW_PREFIX ?? 'sample-shop',
            worker: options.worker ? { concurrency: 20 } : false,
            // Open access for this local sample only: put your own auth check here.
            dashboard: { authorize: () => true },
          }),
        }),
      ],
      controllers: [RunsController],
      providers: [PaymentService, CheckoutWorkflows, AnalyticsWorkflows],
    };
  }
}
