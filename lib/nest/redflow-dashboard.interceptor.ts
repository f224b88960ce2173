import { Inject, Injectable, type CallHandler, type ExecutionContext, type NestInterceptor } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { catchError, type Observable } from 'rxjs';

import { SECURITY_HEADERS, type DashboardApi } from '../dashboard/dashboard-api';
import { httpException } from './redflow-dashboard.guard';
import { REDFLOW_DASHBOARD } from './redflow.constants';

/**
 * Sets the dashboard's security headers on every answer, and turns what its API throws into the
 * HttpException Nest answers with: a status, a code and one sentence; internals go to the log.
 */
@Injectable()
export class RedflowDashboardInterceptor implements NestInterceptor {
  constructor(
    @Inject(REDFLOW_DASHBOARD) private readonly api: DashboardApi,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const response = context.switchToHttp().getResponse<unknown>();
    for (const [name, value] of Object.entries(SECURITY_HEADERS)) this.adapterHost.httpAdapter.setHeader(response, name, value);
    return next.handle().pipe(
      catchError((error: unknown) => {
        throw httpException(this.api.toHttpError(error), response, this.adapterHost);
      }),
    );
  }
}
