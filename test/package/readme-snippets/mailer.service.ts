import { Injectable } from '@nestjs/common';

/** The app's mail provider that the guides' examples call; it takes an idempotency key, as most providers' APIs do. */
@Injectable()
export class MailerService {
  async send(to: string, subject: string, _options: { idempotencyKey?: string } = {}): Promise<{ id: string }> {
    return { id: `msg_${to}_${subject.length}` };
  }
}
