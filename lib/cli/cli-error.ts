import { ConfigurationError } from '../core/errors';
import { printable } from './print';

/** A refusal or failure of the `redflow` command, printed as its one-sentence message (no stack) with exit code 1. */
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

/** The error for a run id that names no run under the prefix. */
export function runNotFound(id: string, prefix: string): CliError {
  return new CliError(`Run "${printable(id)}" does not exist under prefix "${printable(prefix)}".`);
}

/**
 * The outcome of `call`, with a rejection of class `type` replaced by the CliError `refusal`
 * makes of it: how a command turns the engine's expected refusals into one sentence.
 */
export async function refusingWith<T, E extends Error>(
  call: Promise<T>,
  type: abstract new (...args: never[]) => E,
  refusal: (error: E) => CliError,
): Promise<T> {
  try {
    return await call;
  } catch (error) {
    if (error instanceof type) throw refusal(error);
    throw error;
  }
}

/** The outcome of `call`, with a `ConfigurationError` (no such schedule or queue, a bad option) as a refusal in its own words. */
export function refusingConfiguration<T>(call: Promise<T>): Promise<T> {
  return refusingWith(call, ConfigurationError, (error) => new CliError(error.message));
}
