import { RunNotResumableError } from '../../core/errors';
import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { CliError, refusingWith, runNotFound } from '../cli-error';
import { printable } from '../print';

/** `redflow runs resume <id>`: the same run goes on from its first incomplete step. */
export const runsResumeCommand: ClientCommand = {
  usage: 'redflow runs resume <id>',
  async run(client, { values, args, print }) {
    const id = runIdArgument(args, 'runs resume <id>');
    const resumed = await refusingWith(
      client.resume(id),
      RunNotResumableError,
      (error) => new CliError(`Run "${printable(id)}" is ${error.status}: only a failed, canceled, compensation_failed or terminated run can be resumed.`),
    );
    if (!resumed) throw runNotFound(id, values.prefix);
    print({ id, resumed }, () => `Resumed run ${printable(id)}: it goes on from its first incomplete step.`);
  },
};
