import type { IncomingMessage } from 'node:http';

import { assertKnownKeys, describeValue, optionKeys } from '../core/definition/option-checks';
import type { RunState, StepState } from '../core/definition/run-types';
import { ConfigurationError } from '../core/errors';

/** What `authorize` answers instead of `false` to choose the response, e.g. a 401 that makes the browser prompt. */
export interface DashboardDenial {
  /** 401 (not signed in) or 403 (signed in, not allowed). */
  status: 401 | 403;
  /** Extra response headers, such as `WWW-Authenticate`. */
  headers?: Record<string, string>;
  /** A short sentence shown to the user. */
  message?: string;
}

/**
 * Decides whether a request may use the dashboard: `true` lets it in; `false` answers 403; a
 * `DashboardDenial` answers with its status and headers. `request` is Node's request (in Nest on
 * Fastify, the raw request under Fastify's).
 */
export type DashboardAuthorize = (request: IncomingMessage) => boolean | DashboardDenial | Promise<boolean | DashboardDenial>;

/** A Nest guard class used as the dashboard's authorizer: see `guard()` in the Nest layer. */
export interface DashboardGuardRef {
  readonly kind: 'nest-guard';
  readonly guard: abstract new (...args: never[]) => unknown;
}

/** A run as the dashboard and the CLI show it, with its steps: what `redact` receives and returns. */
export type DashboardRun = RunState & { steps: StepState[] };

/** Options of the dashboard, in a Nest app (`RedflowModule.forRoot({ dashboard })`) or standalone. */
export interface DashboardOptions {
  /** Where the dashboard is served, below the app's global prefix in Nest. @default "/redflow" */
  path?: string;
  /**
   * Who may use the dashboard. Required: the dashboard shows run inputs and outputs and can cancel
   * runs, so it is closed until this says otherwise. Use `basicAuth({ username, password })`,
   * `guard(MyGuard)` in Nest, your own function, or `() => true` for open access.
   */
  authorize: DashboardAuthorize | DashboardGuardRef;
  /** Refuse cancel, re-run and resume. @default false */
  readOnly?: boolean;
  /**
   * Changes a run before it is shown or downloaded, to hide what operators should not see. It
   * runs after the default masking (values of keys named like password, token, secret,
   * authorization, api key, cookie, credential or private key become "***"). In run lists it
   * receives each run without input, output and steps.
   */
  redact?: (run: DashboardRun) => DashboardRun;
  /**
   * Signs the page's anti-CSRF tokens. @default a random secret kept in Redis under the prefix,
   * shared by every replica
   */
  secret?: string;
}

/** Keys of `DashboardOptions`. */
export const DASHBOARD_OPTION_KEYS = optionKeys<DashboardOptions>()(['path', 'authorize', 'readOnly', 'redact', 'secret']);

/** The options with defaults applied and checked. */
export interface ResolvedDashboardOptions extends DashboardOptions {
  /** `/redflow`: a leading slash, no trailing slash; `''` for the root. */
  path: string;
  readOnly: boolean;
}

const MISSING_AUTHORIZE = (where: string) =>
  `${where} needs an "authorize" option: the dashboard shows run inputs and outputs and can cancel runs, so it stays closed until you say who may use it. ` +
  `For example: dashboard: { path: "/redflow", authorize: basicAuth({ username: "ops", password: process.env.DASHBOARD_PASSWORD }) }, ` +
  `or authorize: guard(AdminGuard) to reuse a Nest guard; for open access (say, behind your own proxy auth) write authorize: () => true.`;

const PATH_SEGMENT = /^[A-Za-z0-9._~-]+$/;

/** Checks the dashboard options and applies defaults; `where` names them in messages. */
export function resolveDashboardOptions(options: DashboardOptions, where = 'The dashboard'): ResolvedDashboardOptions {
  if (options === null || typeof options !== 'object') {
    throw new ConfigurationError(`${where} options must be an object such as { path: "/redflow", authorize: () => true }, got ${describeValue(options)}.`);
  }
  assertKnownKeys(`${where} options`, options, DASHBOARD_OPTION_KEYS);
  const { authorize } = options;
  const isGuard = typeof authorize === 'object' && authorize !== null && (authorize as DashboardGuardRef).kind === 'nest-guard';
  if (authorize === undefined || authorize === null) throw new ConfigurationError(MISSING_AUTHORIZE(where));
  if (typeof authorize !== 'function' && !isGuard) {
    throw new ConfigurationError(
      `${where} option "authorize" must be a function (request) => boolean, basicAuth(...) or guard(MyGuard), got ${describeValue(authorize)}.`,
    );
  }
  const path = normalizePath(options.path ?? '/redflow', where);
  if (options.readOnly !== undefined && typeof options.readOnly !== 'boolean') {
    throw new ConfigurationError(`${where} option "readOnly" must be true or false, got ${describeValue(options.readOnly)}.`);
  }
  if (options.redact !== undefined && typeof options.redact !== 'function') {
    throw new ConfigurationError(`${where} option "redact" must be a function (run) => run, got ${describeValue(options.redact)}.`);
  }
  if (options.secret !== undefined && (typeof options.secret !== 'string' || options.secret.length < 16)) {
    throw new ConfigurationError(`${where} option "secret" must be a string of at least 16 characters, got ${describeValue(options.secret)}.`);
  }
  return { ...options, path, readOnly: options.readOnly ?? false };
}

/** `"redflow/"` → `"/redflow"`; segments of URL-safe characters only, so no path trick can hide in it. */
function normalizePath(path: unknown, where: string): string {
  if (typeof path !== 'string') throw new ConfigurationError(`${where} option "path" must be a string such as "/redflow", got ${describeValue(path)}.`);
  const segments = path.split('/').filter((s) => s !== '');
  if (segments.some((s) => !PATH_SEGMENT.test(s) || s === '.' || s === '..')) {
    throw new ConfigurationError(
      `${where} option "path" must be made of letters, digits, ".", "_", "~" and "-" between slashes, such as "/ops/redflow", got ${JSON.stringify(path)}.`,
    );
  }
  return segments.length ? `/${segments.join('/')}` : '';
}
