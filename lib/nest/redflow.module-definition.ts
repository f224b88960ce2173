import { ConfigurableModuleBuilder } from '@nestjs/common';
import type { RedflowModuleOptions } from './redflow-options.interface';

export const {
  ConfigurableModuleClass: RedflowConfigurableModule,
  MODULE_OPTIONS_TOKEN: REDFLOW_MODULE_OPTIONS,
  OPTIONS_TYPE: REDFLOW_OPTIONS_TYPE,
  ASYNC_OPTIONS_TYPE: REDFLOW_ASYNC_OPTIONS_TYPE,
} = new ConfigurableModuleBuilder<RedflowModuleOptions>()
  .setClassMethodName('forRoot')
  .setExtras({ isGlobal: false }, (definition, extras) => ({ ...definition, global: extras.isGlobal }))
  .build();
