import { Injectable } from '@nestjs/common';

import { WorkflowAdmin } from '../core';
import { RedflowClient } from './redflow.client';

/**
 * The destructive operations (`resetState`) for the module's prefix. `RedflowClient` has none of
 * them, so a provider can only delete every run if it asks for this class by name.
 */
@Injectable()
export class RedflowAdmin extends WorkflowAdmin {
  constructor(client: RedflowClient) {
    super(client);
  }
}
