import { SignalBufferFullError } from '../../core/errors';
import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { CliError, refusingWith, runNotFound } from '../cli-error';
import { printable } from '../print';

/** The payload argument: JSON text, or no payload (null) when it is left out. */
function payloadArgument(text: string | undefined): unknown {
  if (text === undefined) return null;
  try {
    return JSON.parse(text);
  } catch {
    throw new CliError(`The payload ${printable(text.slice(0, 80))} is not JSON. Quote it for the shell, e.g. '{"approved":true}' or '"yes"'.`);
  }
}

/** `redflow runs signal <id> <name> [json]`: sends a signal to a run (the step waiting for it gets the payload, else it is buffered). */
export const runsSignalCommand: ClientCommand = {
  usage: 'redflow runs signal <id> <name> [json]',
  async run(client, { values, args, print }) {
    const id = runIdArgument(args, 'runs signal <id> <name> [json]');
    const name = args[1];
    if (!name) throw new CliError('Usage: redflow runs signal <id> <name> [json]: give the signal name after the run id.');
    if (args.length > 3) throw new CliError(`Too many arguments: give the payload as one JSON argument, quoted for the shell.`);
    const payload = payloadArgument(args[2]);
    const sent = await refusingWith(client.signal(id, name, payload), SignalBufferFullError, (error) => new CliError(error.message));
    if (!sent) {
      const run = await client.getRun(id);
      if (!run) throw runNotFound(id, values.prefix);
      throw new CliError(`Run ${printable(id)} has ended (${run.status}): it takes no more signals.`);
    }
    print({ id, signal: name, sent }, () => `Sent signal ${printable(name)} to run ${printable(id)}.`);
  },
};
