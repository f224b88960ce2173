import { Catch, HttpStatus, type ArgumentsHost, type ExceptionFilter } from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import { throwError } from 'rxjs';

import {
  IdempotencyConflictError,
  InputValidationError,
  PayloadTooLargeError,
  RateLimitExceededError,
  RedisUnavailableError,
  RedisWriteRefusedError,
  RunNotFoundError,
  UnknownWorkflowError,
  type RedflowError,
} from '../core';

/** The HTTP reply for one of this library's errors: Nest's `{ statusCode, message, error }` shape. */
export interface RedflowHttpError {
  status: number;
  body: { statusCode: number; message: string | string[]; error: string; runId?: string };
}

/** The errors `RedflowExceptionFilter` maps; any other error goes on to Nest's own handling. */
export const REDFLOW_HTTP_ERRORS = [
  InputValidationError,
  UnknownWorkflowError,
  RunNotFoundError,
  IdempotencyConflictError,
  PayloadTooLargeError,
  RateLimitExceededError,
  RedisUnavailableError,
  RedisWriteRefusedError,
] as const;

const reply = (status: HttpStatus, error: string, message: string | string[], extra: { runId?: string } = {}): RedflowHttpError => ({
  status,
  body: { statusCode: status, message, error, ...extra },
});

/** The status and body for one of `REDFLOW_HTTP_ERRORS`. Redis details stay in the server's log. */
export function httpErrorFor(error: RedflowError): RedflowHttpError {
  if (error instanceof InputValidationError) {
    return reply(
      HttpStatus.BAD_REQUEST,
      'Bad Request',
      error.issues.map((i) => (i.path && i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message)),
    );
  }
  if (error instanceof UnknownWorkflowError || error instanceof RunNotFoundError) return reply(HttpStatus.NOT_FOUND, 'Not Found', error.message);
  if (error instanceof IdempotencyConflictError) return reply(HttpStatus.CONFLICT, 'Conflict', error.message, { runId: error.existingRunId });
  if (error instanceof PayloadTooLargeError) return reply(HttpStatus.PAYLOAD_TOO_LARGE, 'Payload Too Large', error.message);
  if (error instanceof RateLimitExceededError) return reply(HttpStatus.TOO_MANY_REQUESTS, 'Too Many Requests', error.message);
  return reply(HttpStatus.SERVICE_UNAVAILABLE, 'Service Unavailable', 'Workflow storage is unavailable. Retry later.');
}

/**
 * Maps this library's errors thrown from a controller to HTTP statuses instead of 500:
 * `InputValidationError` 400 (with the messages), `UnknownWorkflowError` and `RunNotFoundError`
 * 404, `IdempotencyConflictError` 409 (with the existing `runId`), `PayloadTooLargeError` 413,
 * `RateLimitExceededError` 429, `RedisUnavailableError` and `RedisWriteRefusedError` 503. Other
 * errors are not caught here. Registered app-wide by `RedflowModule` unless
 * `exceptionFilter: false`; works on Express and Fastify. Outside HTTP (microservices,
 * websockets) the error is passed on unchanged.
 */
@Catch(...REDFLOW_HTTP_ERRORS)
export class RedflowExceptionFilter implements ExceptionFilter<RedflowError> {
  constructor(private readonly adapterHost: HttpAdapterHost) {}

  catch(error: RedflowError, host: ArgumentsHost): unknown {
    const adapter = this.adapterHost.httpAdapter;
    if (host.getType() !== 'http' || !adapter) return throwError(() => error);
    const { status, body } = httpErrorFor(error);
    adapter.reply(host.switchToHttp().getResponse(), body, status);
    return undefined;
  }
}
