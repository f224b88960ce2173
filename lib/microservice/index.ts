/**
 * `nestjs-redflow/microservice`: the workflow worker as a Nest microservice transport. It is an entry
 * of its own because it needs the optional peer `@nestjs/microservices`, which `nestjs-redflow`
 * itself never loads.
 */
export { RedflowServer } from './redflow.server';
export type { RedflowWorkerControl } from '../nest/redflow-worker-transport.interface';
