import { Injectable } from '@nestjs/common';

import { WorkflowSchedules } from '../core';
import { RedflowClient } from './redflow.client';

/**
 * Control of the module's schedules, injectable: `upsert`, `get`, `list`, `remove`, `pause` /
 * `resume`, `trigger`, `backfill` and `preview`, for runtime schedules and `@Cron` triggers alike.
 */
@Injectable()
export class RedflowSchedules extends WorkflowSchedules {
  constructor(client: RedflowClient) {
    super(client);
  }
}
