import { Inject, type Type } from '@nestjs/common';

import type { CountRunsOptions, ListRunsOptions, RunHandle, RunOptions, RunState, ScheduleState } from '../core';
import type { RedflowClient, TypedScheduleOptions, WorkflowInput, WorkflowMethodName, WorkflowOutput } from './redflow.client';

/**
 * A typed handle on one `@Workflow` method, injected with `@InjectWorkflow(Class, 'method')` after
 * `RedflowModule.forFeature(Class)`: like `@InjectQueue` of `@nestjs/bullmq`, but its input and
 * output are the method's.
 */
export class WorkflowRef<TInput, TOutput> {
  constructor(
    private readonly client: RedflowClient,
    /** The workflow's name in Redis: its `name` option, or "<Class>.<method>". */
    readonly name: string,
  ) {}

  /** Starts a run; the input is validated by the workflow's DTO or schema first. */
  run(input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>> {
    return this.client.runByName<TOutput>(this.name, input, options);
  }

  /** Starts one run per item; every item is checked before the first is stored (see `runManyByName`). */
  runMany(items: ReadonlyArray<{ input: TInput; options?: RunOptions }>): Promise<Array<RunHandle<TOutput>>> {
    return this.client.runManyByName<TOutput>(this.name, items);
  }

  /** The run, or null when it does not exist or is a run of another workflow. */
  async get(runId: string): Promise<RunState<TOutput> | null> {
    const run = await this.client.getRun<TOutput>(runId);
    return run && run.workflow === this.name ? run : null;
  }

  /** Runs of this workflow, newest first: `{ status?, limit?, offset? }`. */
  list(options: Omit<ListRunsOptions, 'workflow'> = {}): Promise<Array<RunState<TOutput>>> {
    return this.client.listRuns({ ...options, workflow: this.name }) as Promise<Array<RunState<TOutput>>>;
  }

  /**
   * Adds (or replaces) the runtime schedule `id` of this workflow: `{ cron | every, input?,
   * timezone? }`, the input typed as the workflow's (see `client.schedule`).
   */
  schedule(id: string, options: TypedScheduleOptions<TInput>): Promise<ScheduleState> {
    return this.client.schedule(id, { ...options, workflow: this.name });
  }

  /** How many runs of this workflow there are, optionally in one status. */
  count(options: Omit<CountRunsOptions, 'workflow'> = {}): Promise<number> {
    return this.client.countRuns({ ...options, workflow: this.name });
  }
}

/** The `WorkflowRef` type of method `K` of workflow class `T`: `WorkflowRefOf<Checkout, 'checkout'>`. */
export type WorkflowRefOf<T, K extends WorkflowMethodName<T>> = WorkflowRef<WorkflowInput<T, K>, WorkflowOutput<T, K>>;

const tokens = new WeakMap<Type<unknown>, Map<string, symbol>>();

/** The injection token of the `WorkflowRef` of `workflowClass.method` (the same symbol on every call). */
export function getWorkflowRefToken(workflowClass: Type<unknown>, method: string): symbol {
  let byMethod = tokens.get(workflowClass);
  if (!byMethod) tokens.set(workflowClass, (byMethod = new Map()));
  let token = byMethod.get(method);
  if (!token)
    byMethod.set(
      method,
      (token = Symbol(`WorkflowRef(${workflowClass.name}.${method}) — add RedflowModule.forFeature(${workflowClass.name}) to this module's imports`)),
    );
  return token;
}

/**
 * Injects the typed `WorkflowRef` of a `@Workflow` method:
 * `constructor(@InjectWorkflow(CheckoutWorkflows, 'checkout') private readonly checkout: WorkflowRefOf<CheckoutWorkflows, 'checkout'>)`.
 * The module must import `RedflowModule.forFeature(CheckoutWorkflows)`.
 */
export function InjectWorkflow<T, K extends WorkflowMethodName<T>>(workflowClass: Type<T>, method: K): PropertyDecorator & ParameterDecorator {
  return Inject(getWorkflowRefToken(workflowClass, method));
}
