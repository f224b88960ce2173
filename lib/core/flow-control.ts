import { toMs } from './duration';
import { ConfigurationError } from './errors';
import type { KeyFrom, WorkflowDefinition } from './workflow';

/** The flow-control fields a new run carries, computed from its input where it is enqueued. */
export interface RunFlowControl {
  debounce?: { key: string; periodMs: number; timeoutMs: number };
  /** Run hash fields (pairs) read by the claim's admission: mutex, throttle, rateLimit. */
  extra: string[];
}

const NONE: RunFlowControl = { extra: [] };

function resolveKey(workflow: string, what: string, key: KeyFrom<unknown> | undefined, input: unknown): string {
  if (key === undefined) return '';
  const value = typeof key === 'function' ? key(input) : key;
  if (typeof value !== 'string' || value === '') {
    throw new ConfigurationError(`The ${what} key of workflow "${workflow}" must be a non-empty string, got ${JSON.stringify(value)}. Return a string from the key function.`);
  }
  return value;
}

/**
 * Debounce key, mutex key and throttle / rate-limit windows of a run. Throttle and rate-limit
 * windows are per workflow; a mutex key is shared by every workflow that uses it.
 */
export function flowControlFor(definition: WorkflowDefinition<unknown, unknown> | undefined, input: unknown): RunFlowControl {
  const o = definition?.options;
  if (!definition || !o || (!o.debounce && !o.mutex && !o.throttle && !o.rateLimit)) return NONE;
  const name = definition.name;
  const extra: string[] = [];
  if (o.mutex !== undefined) extra.push('mutex', resolveKey(name, 'mutex', o.mutex, input));
  for (const kind of ['throttle', 'rateLimit'] as const) {
    const limit = o[kind];
    if (limit) extra.push(kind, `${limit.limit}|${toMs(limit.period)}|${name}|${resolveKey(name, kind, limit.key, input)}`);
  }
  const debounce = o.debounce
    ? {
        key: resolveKey(name, 'debounce', o.debounce.key, input),
        periodMs: toMs(o.debounce.period),
        timeoutMs: o.debounce.timeout === undefined ? 0 : toMs(o.debounce.timeout),
      }
    : undefined;
  return { debounce, extra };
}
