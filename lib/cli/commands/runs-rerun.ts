import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { CliError, runNotFound } from '../cli-error';
import { printable } from '../print';

/** `redflow runs rerun <id>`: a new run of a failed, canceled or terminated run, with the same input. */
export const runsRerunCommand: ClientCommand = {
  usage: 'redflow runs rerun <id>',
  async run(client, { values, args, print }) {
    const id = runIdArgument(args, 'runs rerun <id>');
    const stored = await client.getRun(id);
    if (!stored) throw runNotFound(id, values.prefix);
    if (!['failed', 'canceled', 'terminated'].includes(stored.status)) {
      throw new CliError(`Run "${printable(id)}" is ${stored.status}: only a failed, canceled or terminated run can be re-run.`);
    }
    const { id: runId } = await client.rerun(id);
    print({ id, runId }, () => `Re-ran run ${printable(id)} as a new run ${printable(runId)}, with the same input.`);
  },
};
