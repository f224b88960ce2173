/**
 * `nestjs-redflow`: durable, Redis-backed workflows for NestJS. This entry point is the Nest layer
 * plus everything of the engine and the dashboard, re-exported. Without Nest, import
 * `nestjs-redflow/core` (the engine) and `nestjs-redflow/dashboard` (the plain Node dashboard).
 */
export * from './core';
export * from './dashboard';
export * from './nest';
