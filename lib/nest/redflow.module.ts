import { Inject, Module, Optional, type DynamicModule, type NestModule } from '@nestjs/common';
import { DiscoveryModule, HttpAdapterHost } from '@nestjs/core';
import { WorkflowRegistry } from '../core';
import { RedflowAdmin } from './redflow.admin';
import { createRedflowClient, RedflowClient } from './redflow.client';
import { REDFLOW_DASHBOARD, REDFLOW_REGISTRY } from './redflow.constants';
import type { DashboardApi } from '../dashboard/dashboard-api';
import { dashboardPathMiddleware } from './redflow-dashboard.middleware';
import { withDashboard } from './redflow-dashboard.providers';
import { RedflowExplorer } from './redflow.explorer';
import { RedflowMetadataAccessor } from './redflow-metadata.accessor';
import { REDFLOW_ASYNC_OPTIONS_TYPE, REDFLOW_MODULE_OPTIONS, REDFLOW_OPTIONS_TYPE, RedflowConfigurableModule } from './redflow.module-definition';
import { RedflowOrchestrator } from './redflow.orchestrator';

/**
 * Durable workflows for a Nest app: `RedflowModule.forRoot({ app, connection, worker })` or
 * `forRootAsync(...)`. Discovers `@Workflow` methods, runs the worker and exports `RedflowClient`
 * (and `RedflowAdmin`, for destructive operations);
 * with the `dashboard` option it also serves the dashboard as Nest routes.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    RedflowMetadataAccessor,
    RedflowExplorer,
    RedflowOrchestrator,
    { provide: REDFLOW_REGISTRY, useFactory: () => new WorkflowRegistry() },
    {
      provide: RedflowClient,
      useFactory: createRedflowClient,
      inject: [REDFLOW_MODULE_OPTIONS, REDFLOW_REGISTRY, RedflowMetadataAccessor],
    },
    RedflowAdmin,
  ],
  exports: [RedflowClient, RedflowAdmin],
})
export class RedflowModule extends RedflowConfigurableModule implements NestModule {
  constructor(
    @Optional() @Inject(REDFLOW_DASHBOARD) private readonly dashboard?: DashboardApi | null,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {
    super();
  }

  /** With the dashboard on in an HTTP app, its path check runs before routing, for every path of the app. */
  configure(): void {
    const adapter = this.adapterHost?.httpAdapter;
    if (this.dashboard && adapter) adapter.use(dashboardPathMiddleware(this.dashboard.options.path));
  }

  static forRoot(options: typeof REDFLOW_OPTIONS_TYPE): DynamicModule {
    return withDashboard(super.forRoot(options), options?.dashboard?.path ?? (options?.dashboard ? '/redflow' : undefined), 'forRoot');
  }

  static forRootAsync(options: typeof REDFLOW_ASYNC_OPTIONS_TYPE): DynamicModule {
    return withDashboard(super.forRootAsync(options), options?.dashboardPath, 'forRootAsync');
  }
}
