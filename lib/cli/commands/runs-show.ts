import type { RunState, StepState } from '../../core/definition/run-types';
import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { runNotFound } from '../cli-error';
import { cell, jsonText, statusText, table, time } from '../print';
import { shownRun } from '../redact-module';

/** A step's output or error in one table cell: its first 60 characters (`--json` has it whole). */
const preview = (text: string): string => (text.length > 60 ? `${text.slice(0, 59)}…` : text);

/** What a waiting step waits for: a signal, an event and its match, a child run, or a time. */
function waitText(s: StepState): string {
  if (s.status !== 'waiting') return '';
  const until = s.wakeAt !== undefined ? ` until ${time(s.wakeAt)}` : '';
  if (s.signal !== undefined) return `signal "${s.signal}"${until}`;
  if (s.event !== undefined) return `event "${s.event}"${s.match && Object.keys(s.match).length ? ` matching ${jsonText(s.match)}` : ''}${until}`;
  if (s.childRunId !== undefined) return `run ${s.childRunId}`;
  return until.trim();
}

/** How long a step took: from its first try's start (a retried step) or its wait's to its end. */
function stepDuration(s: StepState): string {
  const from = s.tries?.[0]?.startedAt ?? s.startedAt;
  return s.finishedAt !== undefined && from !== undefined ? `${s.finishedAt - from} ms` : '';
}

/** The run's lines (id, times, progress, input, output or error, children), a blank line and its steps' table. */
function runText(run: RunState, steps: StepState[], children: string[]): string {
  const stepRows = steps.map((s) => ({
    ...s,
    tries: s.attempts ?? '',
    duration: stepDuration(s),
    output: preview(s.output !== undefined ? jsonText(s.output) : s.error ? `${s.error.name}: ${s.error.message}` : ''),
    'waits for': waitText(s),
  }));
  return [
    `${cell(run.id)}  ${cell(run.workflow)}  ${cell(statusText(run.status, run.waitingFor))}  attempt ${run.attempt}/${run.maxAttempts}`,
    `created ${time(run.createdAt)}  finished ${time(run.finishedAt)}`,
    run.progress !== undefined ? `progress: ${jsonText(run.progress)}` : '',
    `input: ${jsonText(run.input)}`,
    run.output !== undefined ? `output: ${jsonText(run.output)}` : '',
    run.error ? `error: ${cell(run.error.name)}: ${cell(run.error.message)}` : '',
    run.compensated ? 'compensated: every compensation of its completed steps ran' : '',
    run.compensationError ? `compensation error: ${cell(run.compensationError.name)}: ${cell(run.compensationError.message)}` : '',
    children.length ? `children: ${children.map(cell).join(', ')}` : '',
    '',
    steps.length ? table(stepRows, ['seq', 'name', 'status', 'attempt', 'tries', 'duration', 'output', 'waits for']) : 'No steps.',
  ]
    .filter((line, i, all) => line !== '' || i === all.length - 2)
    .join('\n');
}

/** `redflow runs show <id>`: one run, its steps (outputs, errors, pending waits) and its children, masked as the dashboard masks them. */
export const runsShowCommand: ClientCommand = {
  usage: 'redflow runs show <id>',
  async run(client, { values, args, redact, print }) {
    const id = runIdArgument(args, 'runs show <id>');
    const stored = await client.getRun(id);
    if (!stored) throw runNotFound(id, values.prefix);
    const [allSteps, children] = await Promise.all([client.getRunSteps(id), client.getRunChildren(id)]);
    const { run, steps } = shownRun(stored, allSteps, redact);
    print({ run, steps, children }, () => runText(run, steps, children));
  },
};
