import type { RunState, StepState } from '../../core/definition/run-types';
import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { runNotFound } from '../cli-error';
import { cell, jsonText, table, time } from '../print';
import { shownRun } from '../redact-module';

/** The run's lines (id, times, progress, input, output or error), a blank line and its steps' table. */
function runText(run: RunState, steps: StepState[]): string {
  const stepRows = steps.map((s) => ({
    ...s,
    tries: s.attempts ?? '',
    duration: s.finishedAt !== undefined && s.startedAt !== undefined ? `${s.finishedAt - s.startedAt} ms` : '',
  }));
  return [
    `${cell(run.id)}  ${cell(run.workflow)}  ${cell(run.status)}  attempt ${run.attempt}/${run.maxAttempts}`,
    `created ${time(run.createdAt)}  finished ${time(run.finishedAt)}`,
    run.progress !== undefined ? `progress: ${jsonText(run.progress)}` : '',
    `input: ${jsonText(run.input)}`,
    run.output !== undefined ? `output: ${jsonText(run.output)}` : '',
    run.error ? `error: ${cell(run.error.name)}: ${cell(run.error.message)}` : '',
    run.compensated ? 'compensated: every compensation of its completed steps ran' : '',
    run.compensationError ? `compensation error: ${cell(run.compensationError.name)}: ${cell(run.compensationError.message)}` : '',
    '',
    steps.length ? table(stepRows, ['seq', 'name', 'status', 'attempt', 'tries', 'duration']) : 'No steps.',
  ]
    .filter((line, i, all) => line !== '' || i === all.length - 2)
    .join('\n');
}

/** `redflow runs show <id>`: one run and its steps, masked as the dashboard masks them. */
export const runsShowCommand: ClientCommand = {
  usage: 'redflow runs show <id>',
  async run(client, { values, args, redact, print }) {
    const id = runIdArgument(args, 'runs show <id>');
    const stored = await client.getRun(id);
    if (!stored) throw runNotFound(id, values.prefix);
    const { run, steps } = shownRun(stored, await client.getRunSteps(id), redact);
    print({ run, steps }, () => runText(run, steps));
  },
};
