/**
 * Public error classes. Every class sets `name`, so `instanceof` and `error.name` both work, and every
 * message names the thing involved and what to do about it. Every meaningful constructor argument is
 * a `readonly` field: serialization stores the fields, so an error read back from Redis keeps them.
 * The error table (`error-table.ts`) says which classes are retried.
 */
export * from './redflow-error';
export * from './configuration-errors';
export * from './payload-errors';
export * from './timeout-errors';
export * from './retry-errors';
export * from './run-errors';
export * from './redis-errors';
export * from './error-table';
