import { Injectable } from '@nestjs/common';

/** The app's carrier that the guides' saga examples call. */
@Injectable()
export class ShippingService {
  async ship(orderId: string): Promise<{ trackingId: string }> {
    return { trackingId: `trk_${orderId}` };
  }
}
