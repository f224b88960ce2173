// orders/payment.service.ts: stands in for a payment provider
import { Injectable } from '@nestjs/common';

@Injectable()
export class PaymentService {
  async charge(orderId: string, cents: number) {
    return { chargeId: `ch_${orderId}`, cents };
  }

  async refund(chargeId: string) {
    return { refunded: chargeId };
  }
}
