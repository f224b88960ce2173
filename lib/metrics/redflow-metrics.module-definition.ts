import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { Registry } from 'prom-client';

import type { RedflowMetricsOptions } from './redflow-metrics';

/** Options of `RedflowMetricsModule.forRoot` / `forRootAsync`. */
export type RedflowMetricsModuleOptions = Omit<RedflowMetricsOptions, 'client' | 'registry'> & {
  /** The registry the metrics are registered on. @default prom-client's default registry */
  registry?: Registry;
};

/** Extras of `forRoot` / `forRootAsync`, fixed when the module is defined. */
export interface RedflowMetricsModuleExtras {
  /** Serve the registry's metrics at this path (a GET route of the app), e.g. "/metrics". @default none: no route */
  path?: string;
}

export const {
  ConfigurableModuleClass: RedflowMetricsConfigurableModule,
  MODULE_OPTIONS_TOKEN: REDFLOW_METRICS_OPTIONS,
  OPTIONS_TYPE: REDFLOW_METRICS_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: REDFLOW_METRICS_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedflowMetricsModuleOptions>()
  .setClassMethodName('forRoot')
  .setExtras<RedflowMetricsModuleExtras>({ path: undefined }, (definition) => definition)
  .build();
