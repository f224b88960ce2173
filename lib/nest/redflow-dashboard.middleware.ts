import { Inject, Injectable, type NestMiddleware } from '@nestjs/common';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { SECURITY_HEADERS, type DashboardApi } from '../dashboard/dashboard-api';
import type { DashboardHttpError } from '../dashboard/dashboard-http-error';
import { checkPathNearDashboard } from '../dashboard/request-checks';
import { REDFLOW_DASHBOARD } from './redflow.constants';

/**
 * Runs for every request of the app, before routing: a raw path that names the dashboard's path
 * but could be read differently by another layer (`..`, `//`, a backslash, a `%` escape, the path
 * in another case) gets 400 here, whether or not the framework would route it to the dashboard.
 * RedflowModule registers it when the dashboard is on; other paths pass untouched.
 */
@Injectable()
export class RedflowDashboardPathMiddleware implements NestMiddleware {
  constructor(@Inject(REDFLOW_DASHBOARD) private readonly api: DashboardApi | null) {}

  use(request: IncomingMessage & { originalUrl?: string }, response: ServerResponse, next: (error?: unknown) => void): void {
    if (!this.api) return next();
    try {
      // Express keeps the raw path in originalUrl when a middleware is mounted on a path; Fastify's middie too.
      checkPathNearDashboard(request.originalUrl ?? request.url ?? '/', this.api.options.path);
    } catch (error) {
      const refusal = error as DashboardHttpError;
      const body = JSON.stringify(refusal.body);
      response.writeHead(refusal.status, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      response.end(body);
      return;
    }
    next();
  }
}
