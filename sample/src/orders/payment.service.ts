import { Injectable } from '@nestjs/common';

/** Stands in for a payment provider: it records charges and refunds so the effects can be seen. */
@Injectable()
export class PaymentService {
  readonly charges: string[] = [];
  readonly refunds: string[] = [];

  async charge(orderId: string, cents: number): Promise<{ chargeId: string; cents: number }> {
    if (cents > 1_000_000) throw new Error(`Card declined for order ${orderId}.`);
    this.charges.push(orderId);
    return { chargeId: `ch_${orderId}`, cents };
  }

  async refund(chargeId: string): Promise<void> {
    this.refunds.push(chargeId);
  }
}
