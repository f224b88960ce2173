import type { WaitingFilter } from '../../core/definition/run-options';
import { RUN_STATUSES, type RunStatus } from '../../core/definition/run-types';
import { redactSummary } from '../../dashboard/redact';
import { wholeNumber } from '../args';
import type { ClientCommand } from '../cli-command';
import { CliError } from '../cli-error';
import { out, printable, safeJson, statusText, table, time } from '../print';
import { shownRun } from '../redact-module';

const options = {
  workflow: { type: 'string' },
  status: { type: 'string' },
  waiting: { type: 'string' },
  limit: { type: 'string', default: '20' },
  offset: { type: 'string', default: '0' },
} as const;

/** The forms of --waiting (the client checks them again): a wait kind, or a signal's or an event's name. */
// eslint-disable-next-line no-control-regex
const WAITING = /^(sleep|signal|event|child|any)$|^(signal|event):[^\x00-\x1f\x7f]+$/;

/** `redflow runs list`: a page of runs, newest first, as a table of summaries or (with --json) whole runs. */
export const runsListCommand: ClientCommand<typeof options> = {
  usage: 'redflow runs list [--workflow W] [--status S] [--waiting sleep|signal|event|child|any|signal:<name>|event:<name>] [--limit 20] [--offset 0]',
  options,
  async run(client, { values, redact }) {
    const status = values.status as RunStatus | undefined;
    if (status && !RUN_STATUSES.includes(status)) throw new CliError(`Unknown status "${printable(status)}". Use one of ${RUN_STATUSES.join(', ')}.`);
    const waiting = values.waiting;
    if (waiting !== undefined && !WAITING.test(waiting)) {
      throw new CliError(`Unknown --waiting "${printable(waiting)}". Use one of sleep, signal, event, child, any, signal:<name> or event:<name>.`);
    }
    const page = {
      workflow: values.workflow,
      status,
      waiting: waiting as WaitingFilter | undefined,
      limit: wholeNumber('--limit', values.limit),
      offset: wholeNumber('--offset', values.offset),
    };
    if (values.json) {
      // Whole runs, as scripts expect them; the table below reads summaries only.
      const runs = (await client.listRuns(page)).map((r) => shownRun(r, [], redact).run);
      out(safeJson(runs));
      return;
    }
    // What a run waits for is the engine's (a signal or event name, a child id), not run data: it
    // is shown beside the redacted row.
    const rows = (await client.listRunSummaries(page)).map((r) => ({ ...redactSummary(r, redact), waitingFor: r.waitingFor }));
    if (!rows.length) {
      // A wrong --prefix finds nothing at all: say so rather than only "No runs match.".
      const registered = await client.listWorkflows();
      if (!registered.length) {
        return out(
          `No runs match. No workflow is registered under prefix "${printable(values.prefix)}": check --prefix (or REDFLOW_PREFIX); a worker registers its workflows when it starts.`,
        );
      }
      return out('No runs match.');
    }
    const shown = rows.map((r) => ({
      ...r,
      status: r.corrupt === undefined ? statusText(r.status, r.waitingFor) : 'corrupt',
      attempt: r.attempt === undefined ? '' : `${r.attempt}/${r.maxAttempts ?? '?'}`,
      created: time(r.createdAt),
      finished: time(r.finishedAt),
    }));
    out(table(shown, ['id', 'workflow', 'status', 'attempt', 'created', 'finished']));
  },
};
