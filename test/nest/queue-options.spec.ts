import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { OnEvent, RedflowClient, RedflowModule, Workflow, type WorkflowContext } from '../../lib';
import { nestAppPerTest } from '../support/nest-app';

type Order = { customerId: string; orderId: string };

@Injectable()
class OrderWorkflows {
  readonly batches: Order[][] = [];

  /** Batches of two orders per customer. */
  @OnEvent('order.placed')
  @Workflow({ name: 'orders-bulk-insert', batch: { maxSize: 2, timeout: '1h', key: 'customerId' } })
  async insert({ input }: WorkflowContext<Order[]>) {
    this.batches.push(input);
    return input.map((o) => o.orderId);
  }

  /** Claimed before runs of lower priority (5 by default; a start may give another). */
  @Workflow({ name: 'refund', priority: 5 })
  async refund({ input }: WorkflowContext<Order>) {
    return input.orderId;
  }

  /** At most one export per customer at a time. */
  @Workflow({ name: 'export', concurrency: { key: (input: Order) => input.customerId, limit: 1 } })
  async export({ input }: WorkflowContext<Order>) {
    return input.orderId;
  }
}

/** `batch`, `priority` and `concurrency` on `@Workflow`, in a Nest app. */
describe('@Workflow batch, priority and concurrency', () => {
  const nest = nestAppPerTest('queue-options');

  it('batches @OnEvent events, and runs prioritized and keyed workflows', async () => {
    const app = await nest.start({
      imports: [RedflowModule.forRoot({ app: 'orders', connection: nest.redis, prefix: nest.prefix })],
      providers: [OrderWorkflows],
    });
    const client = app.get(RedflowClient);
    const workflows = app.get(OrderWorkflows);
    expect(await client.emitEvent('order.placed', { customerId: 'c1', orderId: 'o1' })).toEqual([]);
    const [batchRun] = await client.emitEvent('order.placed', { customerId: 'c1', orderId: 'o2' });
    await expect(client.handle(batchRun).result({ timeout: '10s' })).resolves.toEqual(['o1', 'o2']);
    expect(workflows.batches).toEqual([
      [
        { customerId: 'c1', orderId: 'o1' },
        { customerId: 'c1', orderId: 'o2' },
      ],
    ]);
    const refund = await client.run(OrderWorkflows, 'refund', { customerId: 'c1', orderId: 'r1' }, { priority: 7 });
    const exported = await client.run(OrderWorkflows, 'export', { customerId: 'c1', orderId: 'e1' });
    await expect(refund.result({ timeout: '10s' })).resolves.toBe('r1');
    await expect(exported.result({ timeout: '10s' })).resolves.toBe('e1');
  });
});
