import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { runNotFound } from '../cli-error';
import { printable } from '../print';

const options = { reason: { type: 'string' } } as const;

/** `redflow runs cancel <id>`: cancels a run; one that already ended is left as it is (exit 0). */
export const runsCancelCommand: ClientCommand<typeof options> = {
  usage: 'redflow runs cancel <id> [--reason R]',
  options,
  async run(client, { values, args, print }) {
    const id = runIdArgument(args, 'runs cancel <id>');
    const canceled = await client.cancelRun(id, { reason: values.reason ?? 'canceled from the CLI' });
    // Canceling a run that already ended is done (exit 0); a run that does not exist is an error.
    const status = canceled
      ? 'canceled'
      : await client.getRun(id).then(
          (run) => run?.status,
          () => 'unreadable',
        );
    if (!status) throw runNotFound(id, values.prefix);
    print({ id, canceled }, () => (canceled ? `Canceled run ${printable(id)}.` : `Run ${printable(id)} was not canceled: it already ended (${status}).`));
  },
};
