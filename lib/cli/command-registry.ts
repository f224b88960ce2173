import { COMMON_OPTIONS_HELP } from './args';
import type { CliCommand } from './cli-command';
import { dashboardCommand } from './commands/dashboard';
import { payloadsKeygenCommand, payloadsRotateCommand } from './commands/payloads';
import { queuesListCommand, queuesPauseCommand, queuesResumeCommand } from './commands/queues';
import { runsCancelCommand } from './commands/runs-cancel';
import { runsDeleteCommand } from './commands/runs-delete';
import { runsListCommand } from './commands/runs-list';
import { runsRerunCommand } from './commands/runs-rerun';
import { runsResumeCommand } from './commands/runs-resume';
import { runsShowCommand } from './commands/runs-show';
import { runsSignalCommand } from './commands/runs-signal';
import { runsTerminateCommand } from './commands/runs-terminate';
import { schedulesListCommand, schedulesPauseCommand, schedulesPreviewCommand, schedulesResumeCommand, schedulesTriggerCommand } from './commands/schedules';
import { workflowsCommand } from './commands/workflows';

/** Every command of `redflow` by the words that name it, in the order the help text lists them. */
export const COMMANDS: ReadonlyArray<readonly [name: string, command: CliCommand]> = [
  ['dashboard', dashboardCommand],
  ['runs list', runsListCommand],
  ['runs show', runsShowCommand],
  ['runs cancel', runsCancelCommand],
  ['runs terminate', runsTerminateCommand],
  ['runs delete', runsDeleteCommand],
  ['runs rerun', runsRerunCommand],
  ['runs resume', runsResumeCommand],
  ['runs signal', runsSignalCommand],
  ['workflows', workflowsCommand],
  ['schedules list', schedulesListCommand],
  ['schedules pause', schedulesPauseCommand],
  ['schedules resume', schedulesResumeCommand],
  ['schedules trigger', schedulesTriggerCommand],
  ['schedules preview', schedulesPreviewCommand],
  ['queues list', queuesListCommand],
  ['queues pause', queuesPauseCommand],
  ['queues resume', queuesResumeCommand],
  ['payloads rotate', payloadsRotateCommand],
  ['payloads keygen', payloadsKeygenCommand],
];

/** The help text: each command's usage line, the common options, then each command's own paragraph. */
export const USAGE = ['Usage:', ...COMMANDS.map(([, c]) => `  ${c.usage}`), COMMON_OPTIONS_HELP, ...COMMANDS.flatMap(([, c]) => c.help ?? [])].join('\n');

/**
 * The command the leading positional arguments name (the longest name that matches, word for
 * word) and the arguments after its name, or undefined when they name none.
 */
export function findCommand(positionals: string[]): { command: CliCommand; args: string[] } | undefined {
  let found: { command: CliCommand; args: string[] } | undefined;
  for (const [name, command] of COMMANDS) {
    const words = name.split(' ');
    const matches = words.every((word, i) => positionals[i] === word);
    if (matches && (!found || positionals.length - words.length < found.args.length)) found = { command, args: positionals.slice(words.length) };
  }
  return found;
}
