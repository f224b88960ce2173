/**
 * `nestjs-redflow/dashboard`: the dashboard as a plain Node request handler, with its ready-made
 * authorizer and the masking it applies. Needs no Nest; in a Nest app the module's `dashboard`
 * option serves the same API as Nest routes.
 */
export { createDashboardHandler, type DashboardHandler } from './dashboard-handler';
export { basicAuth, type BasicAuthOptions } from './basic-auth';
export type { DashboardAuthorize, DashboardDenial, DashboardGuardRef, DashboardOptions, DashboardRun } from './dashboard-options';
export { maskSecrets, SECRET_KEY } from './redact';
