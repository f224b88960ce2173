import type { StepApi } from '../../definition/workflow-types';
import { run } from '../step-executor';
import type { StepApiEntry, StepHost } from '../step-host';
import { emitWorkflow, runWorkflow } from './child-run';
import { commit } from './commit';
import { emitEvent } from './emit-event';
import { waitForEvent } from './event';
import { now, patched, random, uuid } from './journaled-values';
import { setProgress } from './progress';
import { child, event, signal, timer, waitForAny } from './race';
import { waitForSignal } from './signal';
import { sleep, waitFor } from './sleep';

/**
 * Every member of the `step` API, in the order the object is built. A new step kind is a file in
 * this folder exporting its entry, and one line here; the type makes the table complete.
 */
const STEP_API: { readonly [K in keyof StepApi]: StepApiEntry<K> } = {
  run,
  sleep,
  waitFor,
  runWorkflow,
  emitWorkflow,
  emitEvent,
  waitForSignal,
  waitForEvent,
  setProgress,
  now,
  random,
  uuid,
  patched,
  commit,
  waitForAny,
  signal,
  timer,
  child,
  event,
};

const KEYS = Object.keys(STEP_API) as Array<keyof StepApi>;

/** The `step` API of one attempt: each member made once, over the attempt's runtime. */
export function buildStepApi(rt: StepHost): StepApi {
  const api: Partial<Record<keyof StepApi, unknown>> = {};
  for (const key of KEYS) api[key] = STEP_API[key](rt);
  return api as StepApi;
}
