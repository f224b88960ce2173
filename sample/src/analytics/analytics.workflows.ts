import { Injectable } from '@nestjs/common';

import { Cron, OnEvent, Workflow, type WorkflowContext } from '../../../lib';

@Injectable()
export class AnalyticsWorkflows {
  readonly completedOrders: string[] = [];

  /** One run per `order.completed` event, across all replicas. */
  @OnEvent('order.completed')
  @Workflow({ name: 'record-sale', maxConcurrency: Infinity })
  async recordSale({ input }: WorkflowContext<{ orderId: string; totalCents: number }>) {
    this.completedOrders.push(input.orderId);
    return { recorded: input.orderId };
  }

  /** One digest per minute across all replicas (a @nestjs/schedule cron would run in each one). */
  @Cron('0 * * * * *', { id: 'sales-digest' })
  @Workflow('sales-digest')
  async digest() {
    return { orders: this.completedOrders.length };
  }
}
