import { Controller, Get, Inject, Res, type Type } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';

import { RedflowMetricsService } from './redflow-metrics.service';

/** Serves the registry's metrics in the Prometheus text format. `metricsController(path)` mounts it. */
export class RedflowMetricsController {
  constructor(
    @Inject(RedflowMetricsService) private readonly service: RedflowMetricsService,
    @Inject(HttpAdapterHost) private readonly adapterHost: HttpAdapterHost,
  ) {}

  @Get()
  async metrics(@Res({ passthrough: true }) response: unknown): Promise<string> {
    const registry = this.service.registry;
    const body = await registry.metrics();
    this.adapterHost.httpAdapter.setHeader(response, 'content-type', registry.contentType);
    return body;
  }
}

/** A fresh subclass of the controller on `path`, so that two modules may serve two paths. */
export function metricsController(path: string): Type<RedflowMetricsController> {
  class MountedRedflowMetricsController extends RedflowMetricsController {}
  Controller(path)(MountedRedflowMetricsController);
  return MountedRedflowMetricsController;
}
