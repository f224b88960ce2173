/**
 * `nestjs-redflow/health`: a `@nestjs/terminus` health indicator for Redflow. Needs the optional
 * peer `@nestjs/terminus` (npm install @nestjs/terminus).
 */
import './terminus-peer';

export { RedflowHealthModule } from './redflow-health.module';
export { RedflowHealthIndicator } from './redflow-health.indicator';
export { checkRedflowHealth, type QueueHealth, type RedflowHealthDetails, type RedflowHealthOptions, type WorkerHealth } from './redflow-health.check';
