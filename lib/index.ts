/**
 * nestjs-redflow: durable, Redis-backed workflows. The engine in `core/` works without Nest.
 */
export * from './core';
