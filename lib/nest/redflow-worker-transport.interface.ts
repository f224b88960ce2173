import { REDFLOW_WORKER_TRANSPORT } from './redflow.constants';

/** What the microservice transport drives: the module's orchestrator, which owns the worker. */
export interface RedflowWorkerControl {
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
}

/** A microservice transport that runs the worker; `RedflowServer` is the one this package ships. */
export interface RedflowWorkerTransport {
  readonly [REDFLOW_WORKER_TRANSPORT]: true;
  /** Called by `RedflowModule` when the app is created with this transport. */
  attach(orchestrator: RedflowWorkerControl): void;
}

/** Whether an RPC target of the app is the worker transport (checked by brand, not by class). */
export function isRedflowWorkerTransport(target: unknown): target is RedflowWorkerTransport {
  return typeof target === 'object' && target !== null && (target as Partial<RedflowWorkerTransport>)[REDFLOW_WORKER_TRANSPORT] === true;
}
