import { Injectable } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { HealthIndicatorService, type HealthIndicatorResult } from '@nestjs/terminus';

import type { WorkerLiveness } from '../core';
import { RedflowClient } from '../nest/redflow.client';
import { RedflowOrchestrator } from '../nest/redflow.orchestrator';
import { checkRedflowHealth, type RedflowHealthOptions } from './redflow-health.check';

/**
 * A `@nestjs/terminus` health indicator for Redflow: Redis (ping and latency), this app's worker
 * (alive, age of its last claim) and the backlog of each queue against optional thresholds.
 *
 * ```ts
 * @Get('health') @HealthCheck()
 * check() {
 *   return this.health.check([() => this.redflow.isHealthy('redflow', { maxQueued: 1000 })]);
 * }
 * ```
 */
@Injectable()
export class RedflowHealthIndicator {
  constructor(
    private readonly healthIndicatorService: HealthIndicatorService,
    private readonly client: RedflowClient,
    private readonly moduleRef: ModuleRef,
  ) {}

  /**
   * Up with its details, or down with the same details and a `problems` list naming what failed
   * (Redis unreachable within `timeoutMs`, a stopped or blocked worker, a queue over a threshold).
   * Rejects with `ConfigurationError` for bad options.
   */
  async isHealthy<const Key extends string = 'redflow'>(key: Key = 'redflow' as Key, options: RedflowHealthOptions = {}): Promise<HealthIndicatorResult<Key>> {
    const indicator = this.healthIndicatorService.check(key);
    const { healthy, details } = await checkRedflowHealth(this.client, this.workers(), options);
    return healthy ? indicator.up({ ...details }) : indicator.down({ ...details });
  }

  /** The worker of this app, when it runs one (a producer-only app has none). */
  private workers(): WorkerLiveness[] {
    let orchestrator: RedflowOrchestrator | undefined;
    try {
      orchestrator = this.moduleRef.get(RedflowOrchestrator, { strict: false });
    } catch {
      return [];
    }
    const worker = orchestrator?.runningWorker;
    return worker ? [worker.liveness] : [];
  }
}
