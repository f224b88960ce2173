import { RunNotEndedError } from '../../core/errors';
import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { CliError, refusingWith, runNotFound } from '../cli-error';
import { printable } from '../print';

const options = { force: { type: 'boolean', default: false } } as const;

/** `redflow runs delete <id>`: deletes an ended run with its steps; --force terminates a live one first. */
export const runsDeleteCommand: ClientCommand<typeof options> = {
  usage: 'redflow runs delete <id> [--force]          delete an ended run with its steps; --force terminates a live one first',
  options,
  async run(client, { values, args, print }) {
    const id = runIdArgument(args, 'runs delete <id> [--force]');
    const deleted = await refusingWith(
      client.deleteRun(id, { force: values.force }),
      RunNotEndedError,
      (error) => new CliError(`Run "${printable(id)}" is ${error.status}: only an ended run can be deleted. Terminate or cancel it first, or pass --force.`),
    );
    if (!deleted) throw runNotFound(id, values.prefix);
    print({ id, deleted }, () => `Deleted run ${printable(id)} and everything it stored.`);
  },
};
