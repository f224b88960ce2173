/**
 * `nestjs-redflow/testing`: `RedflowTestingModule` and `RedflowTesting` for Nest apps, and
 * `createTestEngine()` with the rest of the plain Node helpers. Without Nest installed, import
 * the plain Node helpers from `nestjs-redflow/core/testing`.
 */
export * from './core';
export * from './nest';
