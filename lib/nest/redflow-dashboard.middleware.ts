import type { IncomingMessage, ServerResponse } from 'node:http';

import { SECURITY_HEADERS } from '../dashboard/dashboard-api';
import type { DashboardHttpError } from '../dashboard/dashboard-http-error';
import { checkPathNearDashboard } from '../dashboard/request-checks';

/**
 * The dashboard's path check as a middleware of the HTTP framework itself, for every request of
 * the app, before routing: a raw path that names the dashboard's path but could be read
 * differently by another layer (`..`, `//`, a backslash, a `%` escape, the path in another case)
 * gets 400 here, whether or not the framework would route it to the dashboard. Other paths pass
 * untouched. It is registered on the adapter rather than through `MiddlewareConsumer`, whose
 * routes Nest puts below the global prefix: tricks outside the prefix (`/x/../api/redflow`)
 * must be caught too.
 */
export function dashboardPathMiddleware(dashboardPath: string) {
  return (request: IncomingMessage & { originalUrl?: string }, response: ServerResponse, next: (error?: unknown) => void): void => {
    try {
      checkPathNearDashboard(request.originalUrl ?? request.url ?? '/', dashboardPath);
    } catch (error) {
      const refusal = error as DashboardHttpError;
      const body = JSON.stringify(refusal.body);
      response.writeHead(refusal.status, { ...SECURITY_HEADERS, 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
      response.end(body);
      return;
    }
    next();
  };
}
