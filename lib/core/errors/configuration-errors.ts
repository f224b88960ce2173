/** Options, definitions and names that cannot be used: found before anything reaches Redis. */
import { RedflowError } from './redflow-error';

/** A worker or client option is invalid. */
export class ConfigurationError extends RedflowError {}

/** A cron expression or time zone cannot be parsed. */
export class InvalidCronError extends ConfigurationError {
  constructor(
    readonly workflow: string,
    readonly expression: string,
    readonly timezone: string | undefined,
    readonly reason: string,
  ) {
    super(
      `Cron expression "${expression}"${timezone ? ` with time zone "${timezone}"` : ''} of workflow "${workflow}" is invalid (${reason}). Use croner syntax, e.g. "*/10 * * * * *" (seconds first) or "0 9 * * 1-5", and an IANA time zone such as "Europe/Paris".`,
    );
  }
}

/** No workflow with this name is registered locally or in Redis. */
export class UnknownWorkflowError extends RedflowError {
  constructor(
    readonly workflow: string,
    readonly where = 'in this process or in Redis',
    /** How workflows are defined where the error is read: `defineWorkflow()`, or `@Workflow()` in Nest. */
    definedBy = 'Define it with defineWorkflow() and start a worker (or call syncRegistry()) that registers it.',
  ) {
    super(`Workflow "${workflow}" is not registered ${where}. ${definedBy}`);
  }
}
