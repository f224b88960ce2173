import { Logger, type DynamicModule, type Provider } from '@nestjs/common';

import { ConfigurationError } from '../core';
import { DashboardApi } from '../dashboard/dashboard-api';
import { resolveDashboardOptions } from '../dashboard/dashboard-options';
import { dashboardController } from './redflow-dashboard.controller';
import { RedflowDashboardGuard } from './redflow-dashboard.guard';
import { RedflowDashboardInterceptor } from './redflow-dashboard.interceptor';
import type { RedflowModuleOptions } from './redflow-options.interface';
import { RedflowClient } from './redflow.client';
import { REDFLOW_DASHBOARD, REDFLOW_LOGGER_CONTEXT } from './redflow.constants';
import { REDFLOW_MODULE_OPTIONS } from './redflow.module-definition';

const WHERE = 'RedflowModule option "dashboard"';

/**
 * Adds the dashboard to the module when it has a path: its controller (routes are fixed when the
 * module is defined, so the path must be known then) and the `DashboardApi` built from the
 * resolved options, which checks them at startup. Without a path, a `dashboard` option returned by
 * a forRootAsync factory fails startup with a sentence saying where the path goes.
 */
export function withDashboard(module: DynamicModule, path: string | undefined, method: 'forRoot' | 'forRootAsync'): DynamicModule {
  const api: Provider = {
    provide: REDFLOW_DASHBOARD,
    inject: [REDFLOW_MODULE_OPTIONS, RedflowClient],
    useFactory: (options: RedflowModuleOptions, client: RedflowClient) => {
      if (!options.dashboard) {
        if (path === undefined) return null;
        throw new ConfigurationError(
          `RedflowModule.forRootAsync was given dashboardPath "${path}", but its factory returned no "dashboard" option; return dashboard: { authorize } from the factory, or remove dashboardPath.`,
        );
      }
      if (path === undefined) {
        throw new ConfigurationError(
          `${WHERE} came from the forRootAsync factory, but the dashboard's routes are defined with the module: give the path next to useFactory, as RedflowModule.forRootAsync({ dashboardPath: "/redflow", useFactory: ... }), and return dashboard: { authorize } from the factory.`,
        );
      }
      const resolved = resolveDashboardOptions({ ...options.dashboard, path }, method === 'forRoot' ? WHERE : `${WHERE} (from the forRootAsync factory)`);
      if (options.dashboard.path !== undefined && resolveDashboardOptions({ ...options.dashboard }, WHERE).path !== resolved.path) {
        throw new ConfigurationError(`${WHERE} has path "${options.dashboard.path}" but dashboardPath is "${path}"; give the path once, as dashboardPath.`);
      }
      const logger = new Logger(REDFLOW_LOGGER_CONTEXT);
      logger.log(`Dashboard served at ${resolved.path || '/'}${resolved.readOnly ? ' (read-only)' : ''}.`);
      return new DashboardApi(client, resolved, logger);
    },
  };
  const providers = [...(module.providers ?? []), api];
  if (path === undefined) return { ...module, providers };
  // Checked here too, so a bad path fails before Nest registers any route.
  const routePath = resolvePath(path);
  return {
    ...module,
    providers: [...providers, RedflowDashboardGuard, RedflowDashboardInterceptor],
    controllers: [...(module.controllers ?? []), dashboardController(routePath)],
  };
}

function resolvePath(path: string): string {
  return resolveDashboardOptions({ path, authorize: () => false }, WHERE).path;
}
