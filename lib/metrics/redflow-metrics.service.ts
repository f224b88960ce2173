import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import type { Registry } from 'prom-client';

import type { RunCanceledEvent, RunCompleteEvent, RunFailedEvent, StepCompleteEvent, StepFailedEvent } from '../core';
import { OnRunEvent } from '../nest/decorators/on-run-event.decorator';
import { RedflowClient } from '../nest/redflow.client';
import { redflowMetrics, type RedflowMetrics } from './redflow-metrics';
import { REDFLOW_METRICS_OPTIONS, type RedflowMetricsModuleOptions } from './redflow-metrics.module-definition';

/**
 * Owns the metrics of one app: registers them when created, records this app's worker's runs and
 * steps through `@OnRunEvent`, and removes them from the registry when the app shuts down (so an
 * app created again in the same process registers them again).
 */
@Injectable()
export class RedflowMetricsService implements OnApplicationShutdown {
  private readonly metrics: RedflowMetrics;

  constructor(@Inject(REDFLOW_METRICS_OPTIONS) options: RedflowMetricsModuleOptions, client: RedflowClient) {
    this.metrics = redflowMetrics({ ...options, client });
  }

  /** The registry the metrics are on. */
  get registry(): Registry {
    return this.metrics.registry;
  }

  @OnRunEvent('run.completed')
  runCompleted(event: RunCompleteEvent): void {
    this.metrics.hooks.onRunComplete(event);
  }

  @OnRunEvent('run.failed')
  runFailed(event: RunFailedEvent): void {
    this.metrics.hooks.onRunFailed(event);
  }

  @OnRunEvent('run.canceled')
  runCanceled(event: RunCanceledEvent): void {
    this.metrics.hooks.onRunCanceled(event);
  }

  @OnRunEvent('step.completed')
  stepCompleted(event: StepCompleteEvent): void {
    this.metrics.hooks.onStepComplete(event);
  }

  @OnRunEvent('step.failed')
  stepFailed(event: StepFailedEvent): void {
    this.metrics.hooks.onStepFailed(event);
  }

  onApplicationShutdown(): void {
    this.metrics.remove();
  }
}
