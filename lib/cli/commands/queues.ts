import { createQueues } from '../../core/client/queues';
import { firstArgument } from '../args';
import type { ClientCommand } from '../cli-command';
import { refusingConfiguration } from '../cli-error';
import { printable, table, time } from '../print';

/* `redflow queues list | pause | resume`: queue depths, and pausing a queue (see WorkflowQueues). */

const queueArgument = (args: string[], syntax: string) => firstArgument(args, 'the queue name (redflow queues list shows them)', syntax);

/** `redflow queues list`: each queue's depth and whether it is paused. */
export const queuesListCommand: ClientCommand = {
  usage: 'redflow queues list',
  async run(client, { print }) {
    const queues = await createQueues(client).list();
    const rows = queues.map((q) => ({
      ...q,
      oldest: q.oldestQueuedAt === null ? '' : time(q.oldestQueuedAt),
      state: q.paused ? `paused${q.paused.note ? `: ${q.paused.note}` : ''}` : 'active',
    }));
    print(queues, () => table(rows, ['queue', 'queued', 'scheduled', 'running', 'oldest', 'state']));
  },
};

const pauseOptions = { note: { type: 'string' } } as const;

/** `redflow queues pause <queue> [--note N]`. */
export const queuesPauseCommand: ClientCommand<typeof pauseOptions> = {
  usage: 'redflow queues pause <queue> [--note N]',
  options: pauseOptions,
  async run(client, { values, args, print }) {
    const queue = queueArgument(args, 'queues pause <queue>');
    const changed = await refusingConfiguration(createQueues(client).pause(queue, values.note === undefined ? {} : { note: values.note }));
    print({ queue, paused: true, changed }, () =>
      changed
        ? `Paused queue ${printable(queue)}: workers claim none of its runs until "redflow queues resume ${printable(queue)}"; running runs go on.`
        : `Queue ${printable(queue)} was paused already.`,
    );
  },
};

/** `redflow queues resume <queue>`. */
export const queuesResumeCommand: ClientCommand = {
  usage: 'redflow queues resume <queue>',
  async run(client, { args, print }) {
    const queue = queueArgument(args, 'queues resume <queue>');
    const changed = await refusingConfiguration(createQueues(client).resume(queue));
    print({ queue, paused: false, changed }, () =>
      changed ? `Resumed queue ${printable(queue)}: workers claim its runs again within a second.` : `Queue ${printable(queue)} was not paused.`,
    );
  },
};
