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
