import { Module, type DynamicModule } from '@nestjs/common';

import { ConfigurationError } from '../core/errors';
import { metricsController } from './redflow-metrics.controller';
import { REDFLOW_METRICS_ASYNC_OPTIONS_TYPE, REDFLOW_METRICS_OPTIONS_TYPE, RedflowMetricsConfigurableModule } from './redflow-metrics.module-definition';
import { RedflowMetricsService } from './redflow-metrics.service';

/**
 * Prometheus metrics of Redflow for a Nest app: `RedflowMetricsModule.forRoot()` registers them on
 * prom-client's default registry (or `registry`), and `forRoot({ path: '/metrics' })` also serves
 * that registry at `/metrics`. Needs `RedflowModule.forRoot` in the app (global by default).
 */
@Module({
  providers: [RedflowMetricsService],
  exports: [RedflowMetricsService],
})
export class RedflowMetricsModule extends RedflowMetricsConfigurableModule {
  static forRoot(options: typeof REDFLOW_METRICS_OPTIONS_TYPE = {}): DynamicModule {
    return withController(super.forRoot(options), options.path);
  }

  static forRootAsync(options: typeof REDFLOW_METRICS_ASYNC_OPTIONS_TYPE): DynamicModule {
    return withController(super.forRootAsync(options), options.path);
  }
}

function withController(module: DynamicModule, path: string | undefined): DynamicModule {
  if (path === undefined) return module;
  if (typeof path !== 'string' || !path.startsWith('/') || /[?#%\s]/.test(path)) {
    throw new ConfigurationError(`RedflowMetricsModule path must be a route path starting with "/", like "/metrics", got ${JSON.stringify(path)}.`);
  }
  return { ...module, controllers: [...(module.controllers ?? []), metricsController(path)] };
}
