import { Injectable } from '@nestjs/common';

/** The app's own service that README's migration from @nestjs/schedule calls. */
@Injectable()
export class ReportService {
  async build(): Promise<void> {}
}
