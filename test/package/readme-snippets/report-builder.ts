import { Injectable } from '@nestjs/common';

/** The app's own report builder that docs/migrating-from-nestjs-schedule.md's example calls. */
@Injectable()
export class ReportBuilder {
  async build(): Promise<void> {}
}
