import { RunNotFoundError } from '../../core/errors';
import { runIdArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { refusingWith, runNotFound } from '../cli-error';
import { printable } from '../print';

const options = { reason: { type: 'string' } } as const;

/** `redflow runs terminate <id>`: ends a live run at once; one that already ended is left as it is (exit 0). */
export const runsTerminateCommand: ClientCommand<typeof options> = {
  usage: 'redflow runs terminate <id> [--reason R]    end it now: no cooperative cancel, no cleanup, no onFailure',
  options,
  async run(client, { values, args, print }) {
    const id = runIdArgument(args, 'runs terminate <id>');
    const terminating = client.terminate(id, { reason: values.reason ?? 'terminated from the CLI' });
    const terminated = await refusingWith(terminating, RunNotFoundError, () => runNotFound(id, values.prefix));
    // Terminating a run that already ended is done (exit 0), as with cancel.
    const status = terminated
      ? 'terminated'
      : await client.getRun(id).then(
          (run) => run?.status ?? 'deleted',
          () => 'unreadable',
        );
    const text = terminated ? `Terminated run ${printable(id)}.` : `Run ${printable(id)} was not terminated: it already ended (${status}).`;
    print({ id, terminated }, () => text);
  },
};
