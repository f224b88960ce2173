import { Injectable } from '@nestjs/common';
import { Reflector } from '@nestjs/core';

import type { CronTrigger } from '../core';
import type { RunEventListenerMetadata } from './decorators/on-run-event.decorator';
import type { StepDecoratorOptions } from './decorators/step.decorator';
import type { WorkflowDecoratorOptions } from './decorators/workflow.decorator';
import { REDFLOW_CRON, REDFLOW_ON_EVENT, REDFLOW_ON_RUN_EVENT, REDFLOW_STEP, REDFLOW_WORKFLOW } from './redflow.constants';

type Method = (...args: never[]) => unknown;

/** Reads the decorators' metadata from a method. Nothing else. */
@Injectable()
export class RedflowMetadataAccessor {
  constructor(private readonly reflector: Reflector) {}

  getWorkflow(method: Method): WorkflowDecoratorOptions | undefined {
    return this.reflector.get(REDFLOW_WORKFLOW, method);
  }

  getEvents(method: Method): string[] {
    return this.reflector.get(REDFLOW_ON_EVENT, method) ?? [];
  }

  getCrons(method: Method): CronTrigger[] {
    return this.reflector.get(REDFLOW_CRON, method) ?? [];
  }

  getRunEventListeners(method: Method): RunEventListenerMetadata[] {
    return this.reflector.get(REDFLOW_ON_RUN_EVENT, method) ?? [];
  }

  getStep(method: Method): (Required<Pick<StepDecoratorOptions, 'name'>> & StepDecoratorOptions) | undefined {
    return this.reflector.get(REDFLOW_STEP, method);
  }
}
