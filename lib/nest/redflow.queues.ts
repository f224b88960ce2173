import { Injectable } from '@nestjs/common';

import { WorkflowQueues } from '../core';
import { RedflowClient } from './redflow.client';

/**
 * Pause and resume the module's queues, injectable: `pause(queue, { note })`, `resume(queue)`,
 * `paused()` and `list()`. A paused queue's runs wait, across restarts, until it is resumed.
 */
@Injectable()
export class RedflowQueues extends WorkflowQueues {
  constructor(client: RedflowClient) {
    super(client);
  }
}
