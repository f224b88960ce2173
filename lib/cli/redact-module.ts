import { resolve } from 'node:path';

import type { RunState, StepState } from '../core/definition/run-types';
import type { DashboardRun } from '../dashboard/dashboard-options';
import { redactRun } from '../dashboard/redact';
import { CliError } from './cli-error';
import { printable } from './print';

/** The function of a --redact module: it sees each run after the default masking and returns what is shown. */
export type Redact = (run: DashboardRun) => DashboardRun;

/**
 * The function a --redact module exports (as module.exports, default or `redact`), the same as
 * the dashboard's `redact` option; undefined without --redact.
 */
export function loadRedact(path: string | undefined): Redact | undefined {
  if (path === undefined) return undefined;
  const shown = printable(path);
  let loaded: unknown;
  try {
    loaded = require(resolve(path)) as unknown;
  } catch (error) {
    const why = printable((error as Error).message.split('\n')[0]);
    throw new CliError(`Cannot load the --redact module "${shown}" (${why}): give the path of a JavaScript module that exports a function (run) => run.`);
  }
  const exported = loaded as { default?: unknown; redact?: unknown } | undefined;
  const redact = typeof loaded === 'function' ? loaded : typeof exported?.default === 'function' ? exported.default : exported?.redact;
  if (typeof redact !== 'function') {
    throw new CliError(`The --redact module "${shown}" exports no function: export a function (run) => run, as module.exports or as "redact".`);
  }
  return redact as Redact;
}

/**
 * A run and its steps as the CLI shows them: the whole run masked (inputs, outputs, errors,
 * progress, a waiting step's event match...) as the dashboard masks it, then the --redact function.
 */
export function shownRun(run: RunState, steps: StepState[], redact: Redact | undefined): { run: RunState; steps: StepState[] } {
  const { steps: shownSteps, ...shown } = redactRun({ ...run, steps }, redact);
  return { run: shown, steps: shownSteps };
}
