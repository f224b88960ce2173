import { ConfigurableModuleBuilder } from '@nestjs/common';
import { APP_FILTER } from '@nestjs/core';

import { RedflowExceptionFilter } from './redflow-exception.filter';
import type { RedflowModuleOptions } from './redflow-options.interface';

/** Options given next to the module options, known when the module is defined (not from a factory). */
export interface RedflowModuleExtras {
  /**
   * Makes `RedflowClient`, `RedflowAdmin` and the `@InjectWorkflow` handles of
   * `RedflowModule.forFeature` injectable in every module, like `BullModule.forRoot`. `false` keeps
   * them to the modules that import this one. @default true
   */
  isGlobal?: boolean;
  /**
   * Registers `RedflowExceptionFilter` app-wide, so that this library's errors thrown from a
   * controller become 400, 404, 409, 413, 429 or 503 instead of 500. @default true
   */
  exceptionFilter?: boolean;
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
  .setExtras<RedflowModuleExtras>({ isGlobal: true, exceptionFilter: true, dashboardPath: undefined }, (definition, extras) => ({
    ...definition,
    global: extras.isGlobal !== false,
    providers:
      extras.exceptionFilter === false ? definition.providers : [...(definition.providers ?? []), { provide: APP_FILTER, useClass: RedflowExceptionFilter }],
  }))
  .build();
