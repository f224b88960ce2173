import { Injectable } from '@nestjs/common';

/** The app's stock service that the guides' saga examples call. */
@Injectable()
export class InventoryService {
  async reserve(orderId: string): Promise<{ reservationId: string }> {
    return { reservationId: `res_${orderId}` };
  }

  async release(_reservationId: string): Promise<void> {}
}
