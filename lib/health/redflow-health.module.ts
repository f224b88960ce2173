import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';

import { RedflowHealthIndicator } from './redflow-health.indicator';

/**
 * Provides `RedflowHealthIndicator`. Import it next to `TerminusModule` in the module of your
 * health controller; it needs `RedflowModule.forRoot` in the app (global by default).
 */
@Module({
  imports: [TerminusModule],
  providers: [RedflowHealthIndicator],
  exports: [RedflowHealthIndicator],
})
export class RedflowHealthModule {}
