import type { IncomingMessage } from 'node:http';
import { HttpException, Inject, Injectable, type CanActivate, type ExecutionContext, type OnModuleInit, type Type } from '@nestjs/common';
import { HttpAdapterHost, ModuleRef } from '@nestjs/core';
import { isObservable, lastValueFrom } from 'rxjs';

import { ConfigurationError } from '../core';
import { SECURITY_HEADERS, type DashboardApi } from '../dashboard/dashboard-api';
import { denied } from '../dashboard/dashboard-handler';
import type { DashboardHttpError } from '../dashboard/dashboard-http-error';
import type { DashboardGuardRef } from '../dashboard/dashboard-options';
import { checkNotCrossSiteRead, checkRawPath, checkRoutedPath } from '../dashboard/request-checks';
import { REDFLOW_DASHBOARD } from './redflow.constants';

/**
 * Uses a Nest guard as the dashboard's `authorize`: the guard gets the dashboard request's real
 * execution context, with its dependencies injected. Register the guard as a provider of some
 * module (as `APP_GUARD` or in `providers`) so its dependencies resolve; otherwise it is created
 * in RedflowModule's scope.
 *
 * @example RedflowModule.forRoot({ app: 'shop', dashboard: { path: '/redflow', authorize: guard(AdminGuard) } })
 */
export function guard(guardClass: Type<CanActivate>): DashboardGuardRef {
  if (typeof guardClass !== 'function') throw new ConfigurationError('guard() takes a guard class, such as guard(AdminGuard).');
  return { kind: 'nest-guard', guard: guardClass };
}

/** The node request under the framework's: Express's request is one; Fastify's holds it in `raw`. */
export function nodeRequest(request: IncomingMessage & { raw?: IncomingMessage }): IncomingMessage {
  return request.raw ?? request;
}

type RoutedRequest = IncomingMessage & { raw?: IncomingMessage; originalUrl?: string; route?: { path?: unknown }; routeOptions?: { url?: unknown } };

/** The path of the route that answers the request, as registered (global prefix included): Express's `route.path`, Fastify's `routeOptions.url`. */
function routePath(request: RoutedRequest): string | undefined {
  const path = request.route?.path ?? request.routeOptions?.url;
  return typeof path === 'string' ? path : undefined;
}

/**
 * Turns a dashboard refusal into the HttpException Nest answers with, its headers and the
 * dashboard's security headers set on the response (a guard's refusal never reaches the interceptor).
 */
export function httpException(error: DashboardHttpError, response: unknown, adapterHost: HttpAdapterHost): HttpException {
  for (const [name, value] of Object.entries({ ...SECURITY_HEADERS, ...error.headers })) adapterHost.httpAdapter.setHeader(response, name, value);
  return new HttpException(error.body, error.status);
}

/**
 * Runs before every dashboard route: refuses a raw path other than the route's own (another case,
 * an escape, a trick) and other sites' scripts, then
 * asks the `authorize` option (a function, `basicAuth(...)` or `guard(MyGuard)`). It runs after
 * the app's global guards, so they apply to the dashboard as to any route.
 */
@Injectable()
export class RedflowDashboardGuard implements CanActivate, OnModuleInit {
  private userGuard?: CanActivate;

  constructor(
    @Inject(REDFLOW_DASHBOARD) private readonly api: DashboardApi,
    private readonly moduleRef: ModuleRef,
    private readonly adapterHost: HttpAdapterHost,
  ) {}

  async onModuleInit(): Promise<void> {
    const { authorize } = this.api.options;
    if (typeof authorize === 'function') return;
    const type = authorize.guard as Type<CanActivate>;
    try {
      this.userGuard = this.moduleRef.get(type, { strict: false });
    } catch {
      try {
        this.userGuard = await this.moduleRef.create(type);
      } catch (error) {
        throw new ConfigurationError(
          `The dashboard's guard ${type.name} could not be created (${(error as Error).message.split('\n')[0]}). Add it to the providers of the module that has its dependencies.`,
        );
      }
    }
  }

  async canActivate(context: ExecutionContext): Promise<boolean> {
    const http = context.switchToHttp();
    const request = http.getRequest<RoutedRequest>();
    const raw = nodeRequest(request);
    try {
      const rawUrl = request.originalUrl ?? raw.url ?? '/';
      const route = routePath(request);
      if (route === undefined) checkRawPath(rawUrl);
      else checkRoutedPath(rawUrl, route);
      checkNotCrossSiteRead(raw.headers);
    } catch (error) {
      throw httpException(this.api.toHttpError(error), http.getResponse(), this.adapterHost);
    }
    const { authorize } = this.api.options;
    if (typeof authorize !== 'function') {
      // The app's guard decides, and answers as it always does (its own exceptions included).
      const result = this.userGuard!.canActivate(context);
      if (await (isObservable(result) ? lastValueFrom(result) : result)) return true;
      throw httpException(denied(false), http.getResponse(), this.adapterHost);
    }
    let verdict;
    try {
      verdict = await authorize(raw);
    } catch (error) {
      throw httpException(this.api.toHttpError(error), http.getResponse(), this.adapterHost);
    }
    if (verdict === true) return true;
    throw httpException(denied(verdict), http.getResponse(), this.adapterHost);
  }
}
