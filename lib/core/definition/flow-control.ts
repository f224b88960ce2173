import { ConfigurationError } from '../errors';
import { toMs } from './duration';
import { checkPriority, checkUserName } from './option-checks';
import type { KeyFrom, WorkflowDefinition } from './workflow-types';

/** The flow-control fields a new run carries, computed from its input where it is enqueued. */
export interface RunFlowControl {
  debounce?: { key: string; periodMs: number; timeoutMs: number };
  /**
   * Run hash fields (pairs) read by the claim: conc ("<limit>|<workflow>|<key>"), mutex, throttle,
   * rateLimit (admission), priority (where the run waits) and timeout (ms; the first claim sets
   * the run's deadline from it).
   */
  extra: string[];
}

const NONE: RunFlowControl = { extra: [] };

function resolveKey(workflow: string, what: string, key: KeyFrom<unknown> | undefined, input: unknown): string {
  if (key === undefined) return '';
  const value = typeof key === 'function' ? key(input) : key;
  if (typeof value !== 'string' || value === '') {
    throw new ConfigurationError(
      `The ${what} key of workflow "${workflow}" must be a non-empty string, got ${JSON.stringify(value)}. Return a string from the key function.`,
    );
  }
  return checkUserName(value, `The ${what} key of workflow "${workflow}"`);
}

/** A key given as a function can only be computed by a process that holds the definition. */
function isDynamic(key: unknown): boolean {
  return typeof key === 'function';
}

/** True when any flow-control key of the workflow is computed from the input by a function. */
export function hasDynamicFlowKeys(options: WorkflowDefinition<unknown, unknown>['options']): boolean {
  return (
    isDynamic(options.mutex) ||
    isDynamic(options.concurrency?.key) ||
    isDynamic(options.debounce?.key) ||
    isDynamic(options.throttle?.key) ||
    isDynamic(options.rateLimit?.key)
  );
}

/** The static flow control a registry entry keeps, in the shapes the scripts store on runs. */
export interface RegistryFlowControl {
  mutex?: string;
  throttle?: string;
  rateLimit?: string;
  /** "periodMs|timeoutMs|key" */
  debounce?: string;
  /** The workflow's run timeout in ms, as a string. */
  timeout?: string;
  priority?: string;
  /** "limit|workflow|key" */
  conc?: string;
  /** "maxSize|timeoutMs|key field" (fan-out.lua batches the workflow's events). */
  batch?: string;
  /** Some key is a function: only a process holding the definition can start a run. */
  dynamic: boolean;
}

/**
 * The flow control a workflow's registry entry keeps for runs started without its definition
 * (by name from another process, by an event, by cron): its fixed keys.
 */
export function registryFlowControl(definition: WorkflowDefinition<unknown, unknown>): RegistryFlowControl {
  const timeout = definition.options.timeout === undefined ? undefined : String(toMs(definition.options.timeout));
  const priority = definition.options.priority ? String(definition.options.priority) : undefined;
  const b = definition.options.batch;
  const batch = b ? `${b.maxSize}|${toMs(b.timeout)}|${b.key ?? ''}` : undefined;
  if (hasDynamicFlowKeys(definition.options)) return { dynamic: true, timeout, priority, batch };
  const flow = flowControlFor(definition, undefined);
  const out: RegistryFlowControl = { dynamic: false, batch };
  for (let i = 0; i < flow.extra.length; i += 2) out[flow.extra[i] as 'mutex' | 'throttle' | 'rateLimit' | 'timeout' | 'priority' | 'conc'] = flow.extra[i + 1];
  const d = flow.debounce;
  if (d) out.debounce = `${d.periodMs}|${d.timeoutMs}|${d.key}`;
  return out;
}

/** The error for starting a workflow with function keys from a process without its definition. */
export function dynamicFlowError(workflow: string): ConfigurationError {
  return new ConfigurationError(
    `Workflow "${workflow}" computes a mutex, concurrency, debounce, throttle or rate-limit key from its input with a function, and this process does not have its definition: start it with a client (or from a worker) whose registry defines "${workflow}", or give the option a fixed key.`,
  );
}

/**
 * Debounce key, mutex key and throttle / rate-limit windows of a run. Throttle and rate-limit
 * windows are per workflow; a mutex key is shared by every workflow that uses it.
 */
export function flowControlFor(definition: WorkflowDefinition<unknown, unknown> | undefined, input: unknown): RunFlowControl {
  const o = definition?.options;
  if (!definition || !o || (!o.debounce && !o.mutex && !o.throttle && !o.rateLimit && !o.concurrency && !o.priority && o.timeout === undefined)) {
    return NONE;
  }
  const name = definition.name;
  const extra: string[] = [];
  if (o.timeout !== undefined) extra.push('timeout', String(toMs(o.timeout)));
  if (o.priority) extra.push('priority', String(o.priority));
  if (o.concurrency) {
    // A queue's keys are '@<queue>|<key>': no workflow name starts with '@'.
    const owner = o.concurrency.scope === 'queue' ? `@${definition.queue}` : name;
    extra.push('conc', `${o.concurrency.limit}|${owner}|${resolveKey(name, 'concurrency', o.concurrency.key, input)}`);
  }
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

/**
 * The run fields `extra` with this run's own priority (a start's or a child's `priority` option)
 * in place of the workflow's. A run of a keyed concurrency limit takes no priority.
 */
export function withRunPriority(extra: string[], priority: number | undefined, workflow: string, what: string): string[] {
  if (priority === undefined) return extra;
  checkPriority(priority, `priority of ${what}`);
  const out: string[] = [];
  for (let i = 0; i < extra.length; i += 2) {
    if (extra[i] === 'conc' && priority !== 0) {
      throw new ConfigurationError(
        `Workflow "${workflow}" has a keyed concurrency limit, whose runs are claimed round robin by key without priorities: start it without priority (${what}).`,
      );
    }
    if (extra[i] !== 'priority') out.push(extra[i], extra[i + 1]);
  }
  out.push('priority', String(priority));
  return out;
}
