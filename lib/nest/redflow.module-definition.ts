import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { RedflowModuleOptions } from './redflow-options.interface';

/** Options given next to the module options, known when the module is defined (not from a factory). */
export interface RedflowModuleExtras {
  /** Makes `RedflowClient` injectable in every module. @default false */
  isGlobal?: boolean;
  /**
   * With `forRootAsync`: the path of the dashboard, whose routes are defined with the module; the
   * factory returns the rest of the `dashboard` option. With `forRoot`, give `dashboard.path`.
   */
  dashboardPath?: string;
}

export const {
  ConfigurableModuleClass: RedflowConfigurableModule,
  MODULE_OPTIONS_TOKEN: REDFLOW_MODULE_OPTIONS,
  OPTIONS_TYPE: REDFLOW_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: REDFLOW_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedflowModuleOptions>()
  .setClassMethodName('forRoot')
  .setExtras<RedflowModuleExtras>({ isGlobal: false, dashboardPath: undefined }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
