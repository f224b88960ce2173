import { ConfigurationError, InputValidationError } from '../errors';
import { checkUserName } from './option-checks';
import { validateInput, type InferInput, type InputSchema } from './validation';
import type { SignalDefinition } from './workflow-types';

export type { SignalDefinition } from './workflow-types';

/**
 * Defines a signal: its name and, optionally, a schema the payload is validated with before it is
 * sent (`InputValidationError`, nothing sent).
 *
 * ```ts
 * const approve = defineSignal('approve', ApproveDto); // or defineSignal<{ level: number }>('approve')
 * const decision = await step.waitForSignal('await-approval', approve); // ApproveDto | null
 * await client.signal(runId, approve, { level: 2 });
 * ```
 */
export function defineSignal<S extends InputSchema>(name: string, schema: S): SignalDefinition<InferInput<S>>;
export function defineSignal<T = unknown>(name: string): SignalDefinition<T>;
export function defineSignal(name: string, schema?: InputSchema): SignalDefinition {
  checkUserName(name, 'defineSignal name');
  if (schema !== undefined && typeof schema !== 'function' && (typeof schema !== 'object' || schema === null || !('~standard' in schema))) {
    throw new ConfigurationError(`defineSignal("${name}") takes a Standard Schema (zod, valibot, ...) or a class-validator DTO class as its schema.`);
  }
  return Object.freeze(schema === undefined ? { name } : { name, schema });
}

/** The name of a signal given by name or by definition. */
export function signalName(signal: string | SignalDefinition): string {
  return typeof signal === 'string' ? signal : signal?.name;
}

/**
 * Validates a signal's payload with its schema (what is sent, then, is the schema's output).
 * `label` names the signal in messages, as in `signal "approve"` or `signal "approve" of
 * ApprovalWorkflows`; `owner` is what the `InputValidationError` is about.
 */
export async function validateSignalPayload(label: string, owner: string, schema: InputSchema, payload: unknown): Promise<unknown> {
  try {
    return await validateInput(owner, schema, payload, `S${label.slice(1)} validates its payload`);
  } catch (error) {
    if (error instanceof InputValidationError) throw new InputValidationError(error.workflow, error.issues, `The payload of ${label}`);
    throw error;
  }
}
