/**
 * `nestjs-redflow/metrics`: Prometheus metrics of Redflow, as a Nest module or (`redflowMetrics`)
 * as worker hooks. Needs the optional peer prom-client (npm install prom-client).
 */
export * from './core';
export { RedflowMetricsModule } from './redflow-metrics.module';
export { RedflowMetricsService } from './redflow-metrics.service';
export type { RedflowMetricsModuleExtras, RedflowMetricsModuleOptions } from './redflow-metrics.module-definition';
