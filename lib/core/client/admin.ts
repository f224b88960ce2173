import { scanPrefix } from '../store/prefix-scan';
import { redisAddress, withTimeout } from '../store/redis-health';
import type { WorkflowClient } from './workflow-client';

/**
 * Operations that destroy data, kept off `WorkflowClient` (and so off the injectable
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
}

/** The destructive operations for the prefix of `client`. */
export function createAdmin(client: WorkflowClient): WorkflowAdmin {
  return new WorkflowAdmin(client);
}
