/**
 * `nestjs-redflow/testing/nest`: `RedflowTestingModule` and `RedflowTesting` for Nest apps. A
 * subpath of its own so that `nestjs-redflow/testing` stays usable without Nest installed.
 */
export { RedflowTestingModule } from './redflow-testing.module';
export { RedflowTesting, type RedflowTestingRunOptions, type WorkflowStepMocks } from './redflow-testing';
export type { RedflowTestingOptions } from './redflow-testing.context';
