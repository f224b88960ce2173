/**
 * nestjs-redflow: durable, Redis-backed workflows. `core/` is the engine and works without Nest;
 * `nest/` is the Nest module, decorators and microservice transport over it.
 */
export * from './core';
export * from './nest';
export { createDashboardHandler } from './dashboard/dashboard-handler';
export { basicAuth, type BasicAuthOptions } from './dashboard/basic-auth';
export type { DashboardAuthorize, DashboardDenial, DashboardGuardRef, DashboardOptions, DashboardRun } from './dashboard/dashboard-options';
export { maskSecrets } from './dashboard/redact';
