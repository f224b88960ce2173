/** Injection token of a testing module's context (clock, connection, prefix, step mocks). */
export const REDFLOW_TESTING_CONTEXT = Symbol('REDFLOW_TESTING_CONTEXT');
