import { createClient } from '../client/workflow-client';
import { assertKnownKeys } from '../definition/option-checks';
import { getDefaultRegistry } from '../definition/workflow';
import { Worker } from './worker';
import { WORKER_OPTION_KEYS, type WorkerOptions } from './worker-options';

/** Creates a worker, registers its workflows in Redis and starts executing runs. */
export async function startWorker(options: WorkerOptions): Promise<Worker> {
  const ownsClient = !options.client;
  assertKnownKeys('startWorker options', options, WORKER_OPTION_KEYS);
  const { redis, url, prefix, maxPayloadBytes, commandTimeout, commandTimeoutMs, requireNoEviction, logger, tracing } = options;
  const client =
    options.client ??
    createClient({
      redis,
      url,
      prefix,
      maxPayloadBytes,
      commandTimeout,
      commandTimeoutMs,
      requireNoEviction,
      logger,
      tracing,
      registry: options.registry ?? getDefaultRegistry(),
    });
  const worker = new Worker(client, ownsClient, options);
  try {
    await worker.start();
  } catch (error) {
    await worker.stop({ timeoutMs: 0 });
    throw error;
  }
  return worker;
}
