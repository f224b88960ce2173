import type { CustomTransportStrategy } from '@nestjs/microservices';

import { ConfigurationError } from '../core';
import type { RedflowWorkerControl, RedflowWorkerTransport } from '../nest/redflow-worker-transport.interface';
import { REDFLOW_WORKER_TRANSPORT } from '../nest/redflow.constants';

/**
 * A Nest microservice transport that runs the app's workflow worker:
 * `NestFactory.createMicroservice(AppModule, { strategy: new RedflowServer() })`, or
 * `app.connectMicroservice({ strategy: new RedflowServer() })` in a hybrid app. The worker starts
 * when the microservice listens and drains when it closes. The app must import `RedflowModule`.
 */
export class RedflowServer implements CustomTransportStrategy, RedflowWorkerTransport {
  readonly [REDFLOW_WORKER_TRANSPORT] = true as const;
  private orchestrator: RedflowWorkerControl | undefined;

  /** Called by `RedflowModule` when the app is created with this strategy. */
  attach(orchestrator: RedflowWorkerControl): void {
    this.orchestrator = orchestrator;
  }

  listen(callback: (error?: unknown) => void): void {
    if (!this.orchestrator) {
      callback(
        new ConfigurationError(
          'RedflowServer found no RedflowModule in this app. Import RedflowModule.forRoot() in the module passed to createMicroservice().',
        ),
      );
      return;
    }
    this.orchestrator.startWorker().then(() => callback(), callback);
  }

  async close(): Promise<void> {
    await this.orchestrator?.stopWorker();
  }

  on(): void {
    // The worker has no transport events to subscribe to.
  }

  unwrap<T>(): T {
    throw new ConfigurationError('RedflowServer has no underlying transport client to unwrap; inject RedflowClient instead.');
  }
}
