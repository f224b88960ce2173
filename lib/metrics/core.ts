/**
 * `nestjs-redflow/core/metrics`: Prometheus metrics of Redflow without Nest. Needs the optional
 * peer prom-client (npm install prom-client).
 */
import './prom-client-peer';

export { redflowMetrics, stepLabel, type RedflowMetrics, type RedflowMetricsOptions, type RunOutcomeLabel } from './redflow-metrics';
