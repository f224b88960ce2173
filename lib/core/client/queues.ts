import { assertKnownKeys, checkResourceName } from '../definition/option-checks';
import type { QueuePause, QueueStats } from '../definition/stats-types';
import { ConfigurationError } from '../errors';
import type { WorkflowClient } from './workflow-client';

/** Options of `WorkflowQueues.pause`. */
export interface QueuePauseOptions {
  /** Why, shown with the queue (CLI, dashboard, health): "db migration until 14:00". */
  note?: string;
}

/**
 * Pause and resume a queue, as BullMQ's `queue.pause()`: while a queue is paused no worker of the
 * prefix claims its runs (nor its versions' runs, `<queue>@v<N>`); runs that are running go on,
 * and new runs queue. The pause is kept in Redis (`queue-pause-1.lua`): it holds across restarts
 * and deploys until `resume`. Workers look again about once a second. In Nest: `RedflowQueues`.
 */
export class WorkflowQueues {
  constructor(private readonly client: WorkflowClient) {}

  /** Pauses `queue`; false when it was paused already (its first pause and note are kept). */
  async pause(queue: string, options: QueuePauseOptions = {}): Promise<boolean> {
    checkResourceName(queue, 'The queue to pause');
    assertKnownKeys('pause options', options, ['note']);
    if (options.note !== undefined && (typeof options.note !== 'string' || options.note.length > 1_000)) {
      throw new ConfigurationError(`The note of a queue's pause must be a string of at most 1,000 characters, got ${typeof options.note}.`);
    }
    const pause: QueuePause = { at: this.client.clock.now(), ...(options.note !== undefined && { note: options.note }) };
    return this.client.context.call(() => this.client.scripts.queuePause(queue, JSON.stringify(pause)));
  }

  /** Resumes `queue`: workers claim its runs again within about a second. False when it was not paused. */
  async resume(queue: string): Promise<boolean> {
    checkResourceName(queue, 'The queue to resume');
    return this.client.context.call(() => this.client.scripts.queuePause(queue, null));
  }

  /** The paused queues with their pauses. */
  async paused(): Promise<Record<string, QueuePause>> {
    return this.client.context.call(() => this.client.context.registryQueries.pausedQueues());
  }

  /** Every queue with its depth (`getQueueStats`), a paused one with its `paused`. */
  list(): Promise<QueueStats[]> {
    return this.client.getQueueStats();
  }
}

/** Pause and resume the queues of `client`'s prefix. */
export function createQueues(client: WorkflowClient): WorkflowQueues {
  return new WorkflowQueues(client);
}
