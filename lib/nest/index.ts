import 'reflect-metadata';

export { Cron } from './decorators/cron.decorator';
export { OnEvent } from './decorators/on-event.decorator';
export { OnRunEvent, type OnRunEventOptions } from './decorators/on-run-event.decorator';
export { Step, type StepDecoratorOptions } from './decorators/step.decorator';
export { currentStep } from './step-context';
export { Workflow, type WorkflowDecoratorOptions } from './decorators/workflow.decorator';
export { RedflowAdmin } from './redflow.admin';
export { RedflowSchedules } from './redflow.schedules';
export { RedflowQueues } from './redflow.queues';
export {
  RedflowClient,
  type SignalPayload,
  type TypedScheduleOptions,
  type WorkflowClassWithSignals,
  type WorkflowInput,
  type WorkflowMethodName,
  type WorkflowOutput,
} from './redflow.client';
export { guard } from './redflow-dashboard.guard';
export { RedflowModule, RedflowFeatureModule } from './redflow.module';
export type { RedflowModuleOptions, RedflowWorkerOptions } from './redflow-options.interface';
export { RedflowExceptionFilter, httpErrorFor, REDFLOW_HTTP_ERRORS, type RedflowHttpError } from './redflow-exception.filter';
export { InjectWorkflow, WorkflowRef, getWorkflowRefToken, type WorkflowRefOf } from './workflow-ref';
export type { RedflowRedisOptions, RedflowWorkflowDefaults } from './redflow-options.interface';
