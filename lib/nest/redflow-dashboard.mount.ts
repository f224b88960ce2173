import { Inject, Injectable, Logger, Optional, type OnModuleInit } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createDashboardHandler } from '../dashboard/dashboard-handler';
import { RedflowClient } from './redflow.client';
import { REDFLOW_LOGGER_CONTEXT } from './redflow.constants';
import { REDFLOW_MODULE_OPTIONS } from './redflow.module-definition';
import type { RedflowModuleOptions } from './redflow-options.interface';

type Next = (error?: unknown) => void;

/** Mounts the dashboard on the app's HTTP server when the `dashboard` option is set. */
@Injectable()
export class RedflowDashboardMount implements OnModuleInit {
  private readonly logger = new Logger(REDFLOW_LOGGER_CONTEXT);

  constructor(
    @Inject(REDFLOW_MODULE_OPTIONS) private readonly options: RedflowModuleOptions,
    private readonly client: RedflowClient,
    @Optional() private readonly adapterHost?: HttpAdapterHost,
  ) {}

  onModuleInit(): void {
    const dashboard = this.options.dashboard;
    if (!dashboard) return;
    const adapter = this.adapterHost?.httpAdapter;
    if (!adapter) return; // a microservice or standalone context has no HTTP server
    if (adapter.getType() !== 'express') {
      this.logger.warn(`The dashboard mounts on the Express adapter only; this app uses "${adapter.getType()}". Run it standalone with \`npx redflow dashboard\`.`);
      return;
    }
    const handle = createDashboardHandler(this.client, dashboard);
    const app = adapter.getInstance() as { use(fn: (req: IncomingMessage, res: ServerResponse, next: Next) => void): void };
    app.use((req, res, next) => {
      handle(req, res).then((handled) => handled || next(), next);
    });
    this.logger.log(`Dashboard mounted at ${dashboard.path ?? '/redflow'}${dashboard.readOnly ? ' (read-only)' : ''}.`);
  }
}
