/**
 * nestjs-redflow: durable, Redis-backed workflows. `core/` is the engine and works without Nest;
 * `nest/` is the Nest module, decorators and microservice transport over it.
 */
export * from './core';
export * from './nest';
export { createDashboardHandler, type DashboardOptions } from './dashboard/dashboard-handler';
