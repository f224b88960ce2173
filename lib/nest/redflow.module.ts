import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { WorkflowRegistry } from '../core';
import { createRedflowClient, RedflowClient } from './redflow.client';
import { REDFLOW_REGISTRY } from './redflow.constants';
import { RedflowDashboardMount } from './redflow-dashboard.mount';
import { RedflowExplorer } from './redflow.explorer';
import { RedflowMetadataAccessor } from './redflow-metadata.accessor';
import { REDFLOW_MODULE_OPTIONS, RedflowConfigurableModule } from './redflow.module-definition';
import { RedflowOrchestrator } from './redflow.orchestrator';

/**
 * Durable workflows for a Nest app: `RedflowModule.forRoot({ app, connection, worker })` or
 * `forRootAsync(...)`. Discovers `@Workflow` methods, runs the worker and exports `RedflowClient`.
 */
@Module({
  imports: [DiscoveryModule],
  providers: [
    RedflowMetadataAccessor,
    RedflowExplorer,
    RedflowOrchestrator,
    RedflowDashboardMount,
    { provide: REDFLOW_REGISTRY, useFactory: () => new WorkflowRegistry() },
    {
      provide: RedflowClient,
      useFactory: createRedflowClient,
      inject: [REDFLOW_MODULE_OPTIONS, REDFLOW_REGISTRY, RedflowMetadataAccessor],
    },
  ],
  exports: [RedflowClient],
})
export class RedflowModule extends RedflowConfigurableModule {}
