import { cutText } from '../core/store/run-record';

/**
 * A refusal or failure the dashboard answers with: an HTTP status, a stable code the page and
 * scripts can test, and one short sentence for people. Internal details never go in it; they go
 * to the server log.
 */
export class DashboardHttpError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'DashboardHttpError';
  }

  /** The JSON body of the response. */
  get body(): { statusCode: number; code: string; message: string } {
    return { statusCode: this.status, code: this.code, message: this.message };
  }
}

/** How much of a request's own text (a path, a run id) an error message repeats: a long one is cut. */
export const ECHO_CHARS = 120;

/** `text` from the request, as an error message repeats it: at most ECHO_CHARS characters. */
export const echo = (text: string): string => cutText(text, ECHO_CHARS);

/** 404: no run with this id. */
export function runNotFound(id: string): DashboardHttpError {
  return new DashboardHttpError(404, 'RUN_NOT_FOUND', `Run "${echo(id)}" does not exist.`);
}
