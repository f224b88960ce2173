import { Injectable } from '@nestjs/common';

/** The app's own service that the migration from @nestjs/schedule (README, docs/guide/schedules.md) calls. */
@Injectable()
export class ReportService {
  async build(): Promise<void> {}
}
