/** The Nest part of `nestjs-redflow/testing`: `RedflowTestingModule` and `RedflowTesting`. */
export { RedflowTestingModule } from './redflow-testing.module';
export { RedflowTesting, type RedflowTestingRunOptions, type WorkflowStepMocks } from './redflow-testing';
export type { RedflowTestingOptions } from './redflow-testing.context';
