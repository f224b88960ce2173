import type { IncomingMessage } from 'node:http';
import { Controller, Get, Header, HttpCode, Inject, Post, Query, Req, Res, UseGuards, UseInterceptors, type Type } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';

import type { DashboardApi } from '../dashboard/dashboard-api';
import { nodeRequest, RedflowDashboardGuard } from './redflow-dashboard.guard';
import { RedflowDashboardInterceptor } from './redflow-dashboard.interceptor';
import { REDFLOW_DASHBOARD } from './redflow.constants';

type NestRequest = IncomingMessage & { raw?: IncomingMessage; originalUrl?: string };
type Query = Record<string, unknown>;

/**
 * The dashboard as Nest routes, so the app's global prefix, middleware, guards, interceptors and
 * filters apply to it as to any controller. `dashboardController(path)` mounts it on a path.
 */
@UseGuards(RedflowDashboardGuard)
@UseInterceptors(RedflowDashboardInterceptor)
export class RedflowDashboardController {
  constructor(
    @Inject(REDFLOW_DASHBOARD) private readonly api: DashboardApi,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  /** The page. Its base is the path it was requested at, global prefix included. */
  @Get()
  @Header('content-type', 'text/html; charset=utf-8')
  async page(@Req() request: NestRequest): Promise<string> {
    const path = (request.originalUrl ?? nodeRequest(request).url ?? '/').split('?')[0];
    return (await this.api.page(path.replace(/\/+$/, ''))).body;
  }

  @Get('app.js')
  @Header('content-type', 'text/javascript; charset=utf-8')
  script(): string {
    return this.api.file('app.js').body;
  }

  @Get('app.css')
  @Header('content-type', 'text/css; charset=utf-8')
  styles(): string {
    return this.api.file('app.css').body;
  }

  @Get('api/meta')
  meta() {
    return this.api.meta();
  }

  @Get('api/overview')
  overview() {
    return this.api.overview();
  }

  @Get('api/workflows')
  workflows() {
    return this.api.workflows();
  }

  @Get('api/queues')
  queues() {
    return this.api.queues();
  }

  @Get('api/workers')
  workers() {
    return this.api.workers();
  }

  @Get('api/versions')
  versions() {
    return this.api.versions();
  }

  @Get('api/schedules')
  schedules() {
    return this.api.schedules();
  }

  @Post('api/schedules/trigger')
  @HttpCode(201)
  trigger(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.trigger(query, nodeRequest(request).headers);
  }

  @Post('api/schedules/pause')
  @HttpCode(200)
  pauseSchedule(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.pauseSchedule(query, nodeRequest(request).headers);
  }

  @Post('api/schedules/resume')
  @HttpCode(200)
  resumeSchedule(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.resumeSchedule(query, nodeRequest(request).headers);
  }

  @Get('api/runs')
  runs(@Query() query: Query) {
    return this.api.runs(query);
  }

  @Get('api/runs/ids')
  runIds(@Query() query: Query) {
    return this.api.runIds(query);
  }

  @Post('api/runs/bulk')
  @HttpCode(200)
  bulk(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.bulk(query, nodeRequest(request).headers);
  }

  @Get('api/run')
  run(@Query() query: Query) {
    return this.api.run(query);
  }

  @Get('api/run/history')
  history(@Query() query: Query) {
    return this.api.history(query);
  }

  @Post('api/run/signal')
  @HttpCode(200)
  signal(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.signal(query, nodeRequest(request).headers);
  }

  @Get('api/run/payload')
  @Header('content-type', 'application/json; charset=utf-8')
  async payload(@Query() query: Query, @Res({ passthrough: true }) response: unknown): Promise<string> {
    const { body, filename } = await this.api.payload(query);
    this.adapterHost.httpAdapter.setHeader(response, 'content-disposition', `attachment; filename="${filename}"`);
    return body;
  }

  @Post('api/run/cancel')
  @HttpCode(200)
  cancel(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.cancel(query, nodeRequest(request).headers);
  }

  @Post('api/run/rerun')
  @HttpCode(201)
  rerun(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.rerun(query, nodeRequest(request).headers);
  }

  @Post('api/run/resume')
  @HttpCode(200)
  resume(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.resume(query, nodeRequest(request).headers);
  }

  @Post('api/run/terminate')
  @HttpCode(200)
  terminate(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.terminate(query, nodeRequest(request).headers);
  }

  @Post('api/run/delete')
  @HttpCode(200)
  deleteRun(@Query() query: Query, @Req() request: NestRequest) {
    return this.api.deleteRun(query, nodeRequest(request).headers);
  }
}

/** The dashboard controller on `path`: a subclass per module instance, so two apps never share one. */
export function dashboardController(path: string): Type<RedflowDashboardController> {
  class DashboardRoutes extends RedflowDashboardController {}
  Controller(path)(DashboardRoutes);
  return DashboardRoutes;
}
