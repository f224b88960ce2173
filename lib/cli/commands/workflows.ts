import type { ClientCommand } from '../cli-command';
import { table } from '../print';

/** `redflow workflows`: the registered workflows. */
export const workflowsCommand: ClientCommand = {
  usage: 'redflow workflows',
  async run(client, { print }) {
    const workflows = await client.listWorkflows();
    const rows = workflows.map((w) => ({
      ...w,
      maxConcurrency: w.maxConcurrency === Infinity ? 'unlimited' : w.maxConcurrency,
      events: w.events.join(','),
      crons: w.crons.join(','),
    }));
    print(workflows, () => table(rows, ['name', 'queue', 'maxAttempts', 'maxConcurrency', 'events', 'crons', 'owner']));
  },
};
