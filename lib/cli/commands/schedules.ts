import { createSchedules } from '../../core/client/schedules';
import type { WorkflowClient } from '../../core/client/workflow-client';
import type { CronState } from '../../core/definition/schedule-types';
import { firstArgument, wholeNumber } from '../args';
import type { ClientCommand } from '../cli-command';
import { refusingConfiguration } from '../cli-error';
import { printable, table, time } from '../print';

/*
 * `redflow schedules list | pause | resume | trigger | preview`: runtime schedules and workflows'
 * cron triggers, by the id `list` shows (see WorkflowSchedules).
 */

const scheduleIdArgument = (args: string[], syntax: string) => firstArgument(args, 'the schedule id (redflow schedules list shows them)', syntax);

const when = (cron: CronState) => cron.expression ?? (cron.every !== undefined ? `every ${cron.every} ms` : (cron.rrule?.replace(/\s*\n\s*/g, ' ') ?? ''));
const state = (cron: CronState) => (cron.paused ? `paused${cron.paused.note ? `: ${cron.paused.note}` : ''}` : cron.nextAt === undefined ? 'ended' : 'active');

/** `redflow schedules list`: every schedule and trigger with its next tick, policies and state. */
export const schedulesListCommand: ClientCommand = {
  usage: 'redflow schedules list',
  async run(client, { print }) {
    const crons = await createSchedules(client).list();
    const rows = crons.map((c) => ({
      ...c,
      when: when(c),
      next: time(c.nextAt),
      policies: Object.entries(c.policies ?? {})
        .map(([k, v]) => `${k}=${String(v)}`)
        .join(' '),
      state: state(c),
    }));
    print(crons, () => table(rows, ['id', 'source', 'workflow', 'when', 'timezone', 'next', 'policies', 'state']));
  },
};

const pauseOptions = { note: { type: 'string' } } as const;

/** `redflow schedules pause <id> [--note N]`. */
export const schedulesPauseCommand: ClientCommand<typeof pauseOptions> = {
  usage: 'redflow schedules pause <id> [--note N]',
  options: pauseOptions,
  async run(client, { values, args, print }) {
    const id = scheduleIdArgument(args, 'schedules pause <id>');
    const paused = await refusingConfiguration(createSchedules(client).pause(id, values.note === undefined ? {} : { note: values.note }));
    print(paused, () => `Paused schedule ${printable(id)}: no tick fires until "redflow schedules resume ${printable(id)}".`);
  },
};

/** `redflow schedules resume <id>`. */
export const schedulesResumeCommand: ClientCommand = {
  usage: 'redflow schedules resume <id>',
  async run(client, { args, print }) {
    const id = scheduleIdArgument(args, 'schedules resume <id>');
    const resumed = await refusingConfiguration(createSchedules(client).resume(id));
    print(resumed, () => `Resumed schedule ${printable(id)}: next tick ${resumed.nextAt === undefined ? 'none (it has ended)' : time(resumed.nextAt)}.`);
  },
};

/** `redflow schedules trigger <id>`: a tick now, under the schedule's overlap policy. */
export const schedulesTriggerCommand: ClientCommand = {
  usage: 'redflow schedules trigger <id>',
  async run(client, { args, print }) {
    const id = scheduleIdArgument(args, 'schedules trigger <id>');
    const fired = await refusingConfiguration(createSchedules(client).trigger(id));
    const text: Record<typeof fired.outcome, string> = {
      fired: `Started run ${printable(fired.runId ?? '')} of schedule ${printable(id)}.`,
      overlap: `Started nothing: the previous run of schedule ${printable(id)} goes on (its overlap policy).`,
      skipped: `Started nothing: the workflow of schedule ${printable(id)} is at its maxConcurrency.`,
      unknown: `Started nothing: the workflow of schedule ${printable(id)} is not registered.`,
    };
    print(fired, () => text[fired.outcome]);
  },
};

const previewOptions = { count: { type: 'string' } } as const;

/** `redflow schedules preview <id> [--count N]`: the next fire times. */
export const schedulesPreviewCommand: ClientCommand<typeof previewOptions> = {
  usage: 'redflow schedules preview <id> [--count N]',
  options: previewOptions,
  async run(client: WorkflowClient, { values, args, print }) {
    const id = scheduleIdArgument(args, 'schedules preview <id>');
    const count = values.count === undefined ? 5 : wholeNumber('--count', values.count, 1_000);
    const times = await refusingConfiguration(createSchedules(client).preview(id, count));
    print(
      times.map((t) => t.toISOString()),
      () => (times.length ? times.map((t) => t.toISOString()).join('\n') : `Schedule ${printable(id)} has no tick left.`),
    );
  },
};
