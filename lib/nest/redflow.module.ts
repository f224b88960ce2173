import { Inject, Module, Optional, type DynamicModule, type NestModule, type Provider, type Type } from '@nestjs/common';
import { DiscoveryModule, HttpAdapterHost } from '@nestjs/core';

import { ConfigurationError, WorkflowRegistry } from '../core';
import type { DashboardApi } from '../dashboard/dashboard-api';
import { dashboardPathMiddleware } from './redflow-dashboard.middleware';
import { withDashboard } from './redflow-dashboard.providers';
import { RedflowMetadataAccessor } from './redflow-metadata.accessor';
import { RedflowAdmin } from './redflow.admin';
import { createRedflowClient, RedflowClient } from './redflow.client';
import { REDFLOW_DASHBOARD, REDFLOW_REGISTRY, REDFLOW_WORKFLOW } from './redflow.constants';
import { RedflowExplorer } from './redflow.explorer';
import { REDFLOW_ASYNC_OPTIONS_TYPE, REDFLOW_MODULE_OPTIONS, REDFLOW_OPTIONS_TYPE, RedflowConfigurableModule } from './redflow.module-definition';
import { RedflowOrchestrator } from './redflow.orchestrator';
import { RedflowQueues } from './redflow.queues';
import { RedflowSchedules } from './redflow.schedules';
import { getWorkflowRefToken, WorkflowRef } from './workflow-ref';

/** What an `UnknownWorkflowError` tells a Nest user to do. */
const NEST_HOW_TO_DEFINE =
  'Decorate a provider method with @Workflow() (its name option, or "<Class>.<method>"), and run an app with RedflowModule and its worker enabled: it registers its workflows in Redis at startup.';

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
    { provide: REDFLOW_REGISTRY, useFactory: () => new WorkflowRegistry(NEST_HOW_TO_DEFINE) },
    {
      provide: RedflowClient,
      useFactory: createRedflowClient,
      inject: [REDFLOW_MODULE_OPTIONS, REDFLOW_REGISTRY, RedflowMetadataAccessor],
    },
    RedflowAdmin,
    RedflowSchedules,
    RedflowQueues,
  ],
  exports: [RedflowClient, RedflowAdmin, RedflowSchedules, RedflowQueues],
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

  /**
   * Provides a typed `WorkflowRef` for every `@Workflow` method of the given classes, injected with
   * `@InjectWorkflow(Class, 'method')` in the importing module. Needs `RedflowModule.forRoot` in the
   * app (global by default). Takes the classes as an array, as `TypeOrmModule.forFeature([User])`
   * does, or one by one: `forFeature([A, B])` and `forFeature(A, B)` are the same.
   */
  static forFeature(...workflowClasses: Array<Type<unknown> | Array<Type<unknown>>>): DynamicModule {
    const providers: Provider[] = workflowClasses.flat().flatMap((workflowClass) => {
      if (typeof workflowClass !== 'function') {
        throw new ConfigurationError(
          `RedflowModule.forFeature() takes provider classes with @Workflow methods (forFeature([A, B]) or forFeature(A, B)), got ${workflowClass === null ? 'null' : typeof workflowClass}.`,
        );
      }
      const methods = workflowMethodsOf(workflowClass);
      if (!methods.length)
        throw new ConfigurationError(
          `${workflowClass.name}, given to RedflowModule.forFeature(), has no @Workflow method. Decorate its workflow methods with @Workflow().`,
        );
      return methods.map((method) => ({
        provide: getWorkflowRefToken(workflowClass, method),
        useFactory: (client: RedflowClient) => new WorkflowRef(client, client.workflowNameOf(workflowClass, method as never)),
        inject: [RedflowClient],
      }));
    });
    return { module: RedflowFeatureModule, providers, exports: providers.map((p) => (p as { provide: symbol }).provide) };
  }
}

/** The module `RedflowModule.forFeature()` returns: only its workflow handles. */
@Module({})
export class RedflowFeatureModule {}

/** Names of the `@Workflow` methods of a class, its base classes included. */
function workflowMethodsOf(workflowClass: Type<unknown>): string[] {
  const names = new Set<string>();
  for (let proto = workflowClass.prototype as object | null; proto && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object | null) {
    for (const key of Object.getOwnPropertyNames(proto)) {
      const value = Object.getOwnPropertyDescriptor(proto, key)?.value as unknown;
      if (key !== 'constructor' && typeof value === 'function' && Reflect.getMetadata(REDFLOW_WORKFLOW, value) !== undefined) names.add(key);
    }
  }
  return [...names];
}
