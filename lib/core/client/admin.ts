import { ConfigurationError } from '../errors';
import { rotatePayloads, type PayloadRotationReport } from '../store/payload-rotation';
import { scanPrefix } from '../store/prefix-scan';
import { redisAddress, withTimeout } from '../store/redis-health';
import type { WorkflowClient } from './workflow-client';

export type { PayloadRotationReport } from '../store/payload-rotation';

/**
 * Operations on all the data of a prefix, and those that destroy data, kept off `WorkflowClient` (and so off the injectable
 * `RedflowClient`) so that deleting everything takes an explicit choice: `createAdmin(client)`,
 * or injecting `RedflowAdmin` in Nest.
 */
export class WorkflowAdmin {
  constructor(private readonly client: WorkflowClient) {}

  /**
   * Deletes every key of the client's prefix: all runs, queues, indexes and registry entries, and
   * nothing of any other prefix. For tests and for starting over; stop the workers of the prefix
   * first, or the runs they hold come back as they finish.
   */
  async resetState(): Promise<void> {
    const { redis, keys } = this.client;
    await this.client.ready();
    await withTimeout(
      scanPrefix(redis, keys, '*', async (found, node) => {
        await node.unlink(...found);
      }),
      Math.max(this.client.commandTimeoutMs, 60_000),
      redisAddress(redis),
    );
  }

  /**
   * Encodes again, with the client codec's current key, every stored payload of the prefix that
   * was encoded with another key (or, for a codec without `needsRotation`, every payload). Runs
   * in flight go on: a value rewritten meanwhile is left to its writer and counted as `skipped`;
   * run it again until `skipped` is 0 before removing an old key. `onBatch` sees the running
   * totals after each batch of keys. Also `redflow payloads rotate`.
   */
  async rotatePayloads(options: { onBatch?: (report: PayloadRotationReport) => void } = {}): Promise<PayloadRotationReport> {
    const { context } = this.client;
    if (!context.payloads.codec) {
      throw new ConfigurationError('rotatePayloads needs a client with the codec option, holding the old keys and the new current one.');
    }
    await this.client.ready();
    // No overall timeout: a large prefix takes as long as it takes, batch by batch.
    return rotatePayloads(context.redis, context.keys, context.scripts, context.payloads, options.onBatch);
  }
}

/** The destructive operations for the prefix of `client`. */
export function createAdmin(client: WorkflowClient): WorkflowAdmin {
  return new WorkflowAdmin(client);
}
