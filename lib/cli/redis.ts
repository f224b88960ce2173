import { DISPLAY_PAYLOADS, type ClientOptions } from '../core/client/client-context';
import { WorkflowClient } from '../core/client/workflow-client';
import { aesGcmCodecFromEnv } from '../core/definition/aes-gcm-codec';
import type { PayloadCodec } from '../core/definition/payload-codec';
import { ConfigurationError } from '../core/errors';
import { openConnection } from '../core/store/connection';
import { CliError } from './cli-error';
import { printable } from './print';

/**
 * The CLI's Redis URL, checked and printed safely (the password never appears), and the
 * connection of a command that reads or changes runs.
 */

/**
 * The payload codec of the CLI: `aesGcmCodec` from `REDFLOW_PAYLOAD_KEYS` (and `REDFLOW_PAYLOAD_KEY`,
 * `REDFLOW_PAYLOAD_COMPRESS`), or none: encoded payloads then show as encrypted.
 */
export function cliCodec(): PayloadCodec | undefined {
  try {
    return aesGcmCodecFromEnv();
  } catch (error) {
    if (error instanceof ConfigurationError) throw new CliError(error.message);
    throw error;
  }
}

/** The URL as it may be printed: its password, if any, replaced by `***`. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) {
      parsed.password = '***';
      return parsed.href;
    }
    if (parsed.host) return url;
  } catch {
    // Falls through to the pattern below.
  }
  // Not a URL with an authority to the parser ("redis:/user:pw@host", a typo), but it may still
  // read like one to a person: hide what sits between the last ":" and the "@" of "user:pw@host".
  return url.replace(/^([^@\s]*?:)[^:@\s]*@/, '$1***@');
}

/** Throws a CliError unless `url` is a redis:// or rediss:// URL with a host. */
export function checkRedisUrl(url: string): void {
  let protocol: string | undefined;
  let host: string | undefined;
  try {
    ({ protocol, host } = new URL(url));
  } catch {
    protocol = undefined;
  }
  if ((protocol !== 'redis:' && protocol !== 'rediss:') || !host) {
    throw new CliError(`"${printable(redactUrl(url))}" is not a Redis URL: use --redis redis://host:port (or set REDIS_URL).`);
  }
}

/**
 * What a connection error says, safe to print: a failed dual-stack connect is an AggregateError
 * with an empty message, and the URL's password is cut out in case the error quotes it.
 */
export function connectionErrorText(error: Error, url: string): string {
  const text = error.message || (error as { code?: string }).code || error.name;
  const password = new URL(url).password;
  if (!password) return text;
  return [password, decodedOrSame(password)].reduce((safe, secret) => safe.split(secret).join('***'), text);
}

function decodedOrSame(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text; // a stray "%" that is not an escape
  }
}

/** A client for one command: it connects once and fails at once when Redis does not answer. */
export async function connectOnce(url: string, prefix: string): Promise<WorkflowClient> {
  const redisOptions = { lazyConnect: true, connectTimeout: 3000, maxRetriesPerRequest: 1, retryStrategy: () => null };
  const { redis } = openConnection({ url, redisOptions });
  let cause: Error | undefined;
  redis.on('error', (error: Error) => (cause ??= error)); // reported below, once
  try {
    await redis.connect();
    await redis.ping();
  } catch (error) {
    redis.disconnect();
    const why = connectionErrorText(cause ?? (error as Error), url);
    throw new CliError(`Cannot connect to Redis at ${redactUrl(url)} (${why}): check --redis or REDIS_URL, and that Redis is running.`);
  }
  return new WorkflowClient(redis, true, { prefix, codec: cliCodec(), [DISPLAY_PAYLOADS]: true } as ClientOptions);
}
