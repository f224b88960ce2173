import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { InjectWorkflow, RedflowClient, RedflowModule, Step, Workflow, type WorkflowContext, type WorkflowRefOf } from '../../lib';
import { FAST_RUNTIME } from '../support/engine';
import { nestAppPerTest } from '../support/nest-app';

@Injectable()
class PaymentWorkflows {
  @Workflow({ name: 'refund' })
  async refund({ input }: WorkflowContext<{ chargeId: string; cents: number }>) {
    return { refunded: input.cents, of: input.chargeId };
  }
}

@Injectable()
class OrderWorkflows {
  constructor(@InjectWorkflow(PaymentWorkflows, 'refund') private readonly refundRef: WorkflowRefOf<PaymentWorkflows, 'refund'>) {}

  /** A child workflow named by class and method, through its typed handle: input and output are checked at compile time. */
  @Workflow({ name: 'cancel-order' })
  async cancel({ input, step }: WorkflowContext<{ order: string }>) {
    const charge = await this.charge(input.order);
    const refund = await step.runWorkflow('refund', this.refundRef, { chargeId: charge, cents: 1999 });
    const total: number = refund.refunded; // typed by PaymentWorkflows.refund's return type
    return { order: input.order, total };
  }

  @Step('find-charge')
  async charge(order: string) {
    return `ch_${order}`;
  }
}

describe('child workflows typed by class and method (a WorkflowRef as the target of step.runWorkflow)', () => {
  const nest = nestAppPerTest('typed-children');

  it('starts the child by its registered name with the typed input, and returns its typed output', async () => {
    await nest.start({
      imports: [
        RedflowModule.forRoot({ app: 'typed-children', connection: nest.redis, prefix: nest.prefix, worker: { runtime: FAST_RUNTIME } }),
        RedflowModule.forFeature([PaymentWorkflows]),
      ],
      providers: [PaymentWorkflows, OrderWorkflows],
    });
    const client = nest.app!.get(RedflowClient);
    const run = await client.run(OrderWorkflows, 'cancel', { order: 'A-1' });
    await expect(run.result({ timeoutMs: 10_000 })).resolves.toEqual({ order: 'A-1', total: 1999 });
    const child = await client.getRun(`${run.id}.refund`);
    expect(child).toMatchObject({ workflow: 'refund', status: 'succeeded', output: { refunded: 1999, of: 'ch_A-1' } });
  });
});
