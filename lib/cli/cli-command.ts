import type { WorkflowClient } from '../core/client/workflow-client';
import type { CommonValues, OptionSpecs, OptionValues } from './args';
import type { Redact } from './redact-module';

/** What a command is given once the command line is read and checked. */
export interface CommandInput<O extends OptionSpecs> {
  /** The common options and the command's own. */
  values: CommonValues & OptionValues<O>;
  /** The words after the command's name: for `redflow runs show <id>`, the id. */
  args: string[];
  /** The --redact module's function, if one was given. */
  redact: Redact | undefined;
  /** Prints `data` as JSON with --json, else `text()`. */
  print(data: unknown, text: () => string): void;
}

interface CommandHelp<O extends OptionSpecs> {
  /** Its line under "Usage:" in the help text. */
  usage: string;
  /** The options only it takes; every command also takes the common ones. */
  options?: O;
  /** Its own paragraph after the common options in the help text. */
  help?: string;
}

/** A command that reads or changes runs through a client connected for it alone, closed when it returns. */
export interface ClientCommand<O extends OptionSpecs = OptionSpecs> extends CommandHelp<O> {
  run(client: WorkflowClient, input: CommandInput<O>): Promise<void>;
}

/** A command that opens and keeps a connection of its own, such as the dashboard's server. */
export interface ServerCommand<O extends OptionSpecs = OptionSpecs> extends CommandHelp<O> {
  serve(input: CommandInput<O>): Promise<void>;
}

/** One command of `redflow`. */
export type CliCommand = ClientCommand | ServerCommand;
