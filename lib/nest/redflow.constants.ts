/** Metadata keys, namespaced so they never collide with other libraries'. */
export const REDFLOW_WORKFLOW = 'redflow:workflow';
export const REDFLOW_STEP = 'redflow:step';
export const REDFLOW_ON_EVENT = 'redflow:on-event';
export const REDFLOW_CRON = 'redflow:cron';
export const REDFLOW_ON_RUN_EVENT = 'redflow:on-run-event';

/** Injection token of the module's workflow registry (one per module instance). */
export const REDFLOW_REGISTRY = Symbol('REDFLOW_REGISTRY');

/** Logger context of everything the Nest layer logs. */
export const REDFLOW_LOGGER_CONTEXT = 'Redflow';

/** Injection token of the dashboard's API (`DashboardApi`, or null without the `dashboard` option). */
export const REDFLOW_DASHBOARD = Symbol('REDFLOW_DASHBOARD');

/**
 * Brand of the microservice transport that runs the worker (`RedflowServer`, in
 * `nestjs-redflow/microservice`). The orchestrator recognises the transport by this brand rather than
 * by its class, so the root entry never loads `@nestjs/microservices`.
 */
export const REDFLOW_WORKER_TRANSPORT = Symbol('redflow:worker-transport');
