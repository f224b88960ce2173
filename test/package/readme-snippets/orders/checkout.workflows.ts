// orders/checkout.workflows.ts: the sample shop's checkout as docs/guide/getting-started.md shows it (docs/guide/testing.md imports it)
import { Injectable } from '@nestjs/common';
import { NonRetriableError, Step, Workflow, type WorkflowContext } from 'nestjs-redflow';

import { CreateOrderDto } from './create-order.dto';
import { PaymentService } from './payment.service';

@Injectable()
export class CheckoutWorkflows {
  constructor(private readonly payments: PaymentService) {}

  @Workflow({ name: 'checkout', input: CreateOrderDto, maxConcurrency: 20, retries: { maxAttempts: 3, delay: '200ms' }, onFailure: 'compensate' })
  async checkout({ input, step }: WorkflowContext<CreateOrderDto>) {
    const payment = await this.chargeCard(input.orderId, input.totalCents);
    await step.sleep('cooldown', '1h');
    const receipt = await step.runWorkflow('receipt', 'send-receipt', { orderId: input.orderId, email: input.email });
    if (input.orderId.startsWith('fail-')) throw new NonRetriableError(`Order ${input.orderId} cannot be shipped.`);
    await step.emitEvent('announce', 'order.completed', { orderId: input.orderId, totalCents: input.totalCents });
    return { orderId: input.orderId, chargeId: payment.chargeId, receipt };
  }

  /** A durable step: on a retry or after a crash the card is not charged again. */
  @Step('charge-card')
  chargeCard(orderId: string, cents: number) {
    return this.payments.charge(orderId, cents);
  }

  /** onFailure: undo the charge when checkout fails for good. */
  async compensate({ input }: { input: unknown }) {
    const { orderId } = input as CreateOrderDto;
    await this.payments.refund(`ch_${orderId}`);
  }

  @Workflow({ name: 'send-receipt', queue: 'email', maxConcurrency: Infinity })
  async sendReceipt({ input }: WorkflowContext<{ orderId: string; email: string }>) {
    return { to: input.email, subject: `Your order ${input.orderId}` };
  }
}
