import 'reflect-metadata';
export { Cron } from './decorators/cron.decorator';
export { OnEvent } from './decorators/on-event.decorator';
export { Step, type StepDecoratorOptions } from './decorators/step.decorator';
export { Workflow, type WorkflowDecoratorOptions } from './decorators/workflow.decorator';
export { RedflowClient, type WorkflowInput, type WorkflowMethodName, type WorkflowOutput } from './redflow.client';
export { RedflowModule } from './redflow.module';
export type { RedflowModuleOptions, RedflowWorkerOptions } from './redflow-options.interface';
export { RedflowServer } from './redflow.server';
