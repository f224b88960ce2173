import { idempotencyTtlSec, timeOption } from '../../definition/duration';
import { dynamicFlowError, flowControlFor, withRunPriority } from '../../definition/flow-control';
import { checkIdempotencyKey, CHILD_RUN_OPTION_KEYS, versionQueue } from '../../definition/option-checks';
import { validateInput } from '../../definition/validation';
import type { ChildRunOptions, WorkflowTarget } from '../../definition/workflow';
import { CorruptRunDataError, IdempotencyConflictError, TimeoutError } from '../../errors';
import type { StepTarget } from '../../store/redis-scripts';
import { traceFields } from '../../store/run-record';
import { deserializeError, encodeInput } from '../../store/serialization';
import { decodeStepRecord } from '../../store/step-record';
import type { StepApiEntry, StepHost } from '../step-host';

/** `step.runWorkflow`. */
export const runWorkflow: StepApiEntry<'runWorkflow'> =
  (rt) =>
  <I, O>(options: ChildRunOptions | string, workflow: WorkflowTarget<I, O>, input: I) =>
    rt.track(startChild(rt, 'wait', options, workflow as WorkflowTarget, input)) as Promise<O>;

/** `step.emitWorkflow`. */
export const emitWorkflow: StepApiEntry<'emitWorkflow'> =
  (rt) =>
  <I>(options: ChildRunOptions | string, workflow: WorkflowTarget<I>, input: I) =>
    rt.track(startChild(rt, 'emit', options, workflow as WorkflowTarget, input)) as Promise<string>;

/**
 * `step.runWorkflow` (mode `wait`: the run waits for the child's result) and `step.emitWorkflow`
 * (mode `emit`: the child's id, fire and forget). The child's id is deterministic, so a replay
 * finds the child the first attempt started.
 */
async function startChild(rt: StepHost, mode: 'wait' | 'emit', options: ChildRunOptions | string, workflow: WorkflowTarget, input: unknown): Promise<unknown> {
  const { ctx } = rt;
  const api = mode === 'wait' ? 'runWorkflow' : 'emitWorkflow';
  const { opts, name, field, record, timeoutMs } = rt.replay.begin<ChildRunOptions>(api, options, CHILD_RUN_OPTION_KEYS);
  if (record?.kind === 'succeeded') return record.output;
  if (record?.kind === 'child') {
    const deadline = record.deadline;
    if (deadline && ctx.clock.now() >= deadline) {
      rt.failAt(field, ctx.clock.now(), new TimeoutError(`Waiting for child run "${record.childRunId}" of step "${name}"`, timeoutMs ?? 0));
    }
    rt.suspend(deadline, field);
  }
  await rt.ready();
  const deadline = mode === 'wait' && timeoutMs !== undefined ? ctx.clock.now() + timeoutMs : 0;
  const { result, workflowName } = await callStartChild(rt, {
    step: rt.target(field),
    mode,
    childId: `${ctx.runId}.${name}`,
    workflow,
    input,
    what: `step "${name}"`,
    runAt: timeOption(opts.runAt, 'runAt'),
    idempotencyKey: opts.idempotencyKey === undefined ? '' : checkIdempotencyKey(opts.idempotencyKey, `idempotencyKey of step "${name}"`),
    idempotencyTtlSec: idempotencyTtlSec(opts, `step "${name}"`),
    priority: opts.priority,
    deadline,
  });
  if (result.code === 'conflict') throw new IdempotencyConflictError(workflowName, opts.idempotencyKey!, result.childId);
  if (mode === 'emit') return result.childId;
  const stored = decodeStepRecord(ctx.runId, field, result.record, ctx.payloads);
  if (stored.kind === 'child') rt.suspend(deadline, field);
  if (stored.kind === 'succeeded') return stored.output;
  if (stored.kind === 'failed') throw deserializeError(JSON.stringify(stored.error));
  throw new CorruptRunDataError(ctx.runId, `field "${field}" holds a ${stored.kind} record after its child run started`);
}

/** What `callStartChild` starts: the step it belongs to, the child and how it runs. */
export interface ChildStart {
  step: StepTarget;
  mode: 'wait' | 'emit' | 'race';
  childId: string;
  workflow: WorkflowTarget;
  input: unknown;
  what: string;
  runAt: number;
  idempotencyKey: string;
  idempotencyTtlSec: number;
  deadline: number;
  /** The child's own priority (`ChildRunOptions.priority`), instead of its workflow's. */
  priority?: number;
}

/**
 * Starts (or finds) a child run, validated against its definition when this process has it, on
 * the queue of that definition's version: what `step.runWorkflow`, `step.emitWorkflow` and the
 * child branches of `step.waitForAny` share. Throws for a lost lease, an unknown workflow or a
 * flow-control key this process cannot compute.
 */
export async function callStartChild(rt: StepHost, a: ChildStart) {
  const { ctx } = rt;
  const workflowName = typeof a.workflow === 'string' ? a.workflow : a.workflow.name;
  // A definition validates with its own schema; a name or a named handle with the registry's.
  const definition = typeof a.workflow !== 'string' && 'options' in a.workflow ? a.workflow : ctx.registry.get(workflowName);
  if (definition) await validateInput(workflowName, definition.options.schema, a.input);
  const flow = flowControlFor(definition as Parameters<typeof flowControlFor>[0], a.input);
  const result = await ctx.call(() =>
    ctx.scripts.startChild({
      step: a.step,
      now: ctx.clock.now(),
      mode: a.mode,
      childId: a.childId,
      workflow: workflowName,
      queue: definition ? versionQueue(definition.queue, definition.version) : '',
      maxAttempts: definition ? String(definition.maxAttempts) : '',
      input: ctx.payloads.seal(encodeInput(workflowName, a.input, `The input of child workflow "${workflowName}" (${a.what})`, ctx.maxPayloadBytes), {
        kind: 'input',
      }),
      runAt: a.runAt,
      idempotencyKey: a.idempotencyKey,
      idempotencyTtlSec: a.idempotencyTtlSec,
      deadline: a.deadline,
      localFlow: definition !== undefined,
      debounce: flow.debounce,
      extra: withTrace(rt, withRunPriority(flow.extra, a.priority, workflowName, a.what)),
    }),
  );
  if (result.code === 'lost') rt.lost();
  if (result.code === 'unknown') throw ctx.registry.unknownWorkflow(workflowName);
  if (result.code === 'dynamic') throw dynamicFlowError(workflowName);
  return { result, workflowName };
}

/** A child run's extra fields with the active trace context (the attempt's or a step's span), when tracing is on. */
function withTrace(rt: StepHost, extra: string[]): string[] {
  const trace = rt.ctx.tracing?.inject();
  return trace ? [...extra, ...traceFields(trace)] : extra;
}
