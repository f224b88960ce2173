import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

import { assertKnownKeys, describeValue } from '../core/definition/option-checks';
import { ConfigurationError } from '../core/errors';
import type { DashboardAuthorize, DashboardDenial } from './dashboard-options';

/** Options of `basicAuth`. */
export interface BasicAuthOptions {
  username: string;
  password: string;
  /** Shown by the browser's sign-in prompt. @default "Redflow" */
  realm?: string;
}

/** Equal-length digests, so the comparison takes the same time whatever the input. */
const digest = (text: string) => createHash('sha256').update(text, 'utf8').digest();

/**
 * An `authorize` function for HTTP Basic authentication: the browser asks for a user name and
 * password, and the dashboard opens when they match. Use it over HTTPS only: Basic sends the
 * password with every request, merely base64-encoded.
 *
 * @example dashboard: { path: '/redflow', authorize: basicAuth({ username: 'ops', password: process.env.DASHBOARD_PASSWORD! }) }
 */
export function basicAuth(options: BasicAuthOptions): DashboardAuthorize {
  assertKnownKeys('basicAuth options', options, ['username', 'password', 'realm']);
  for (const key of ['username', 'password'] as const) {
    const value = options?.[key];
    if (typeof value !== 'string' || value === '') {
      throw new ConfigurationError(
        `basicAuth option "${key}" must be a non-empty string, got ${describeValue(value)}. Read it from your configuration, e.g. process.env.DASHBOARD_PASSWORD.`,
      );
    }
  }
  if (options.username.includes(':'))
    throw new ConfigurationError('basicAuth option "username" cannot contain ":" (HTTP Basic separates the user name from the password with it).');
  const realm = (options.realm ?? 'Redflow').replace(/["\\\r\n]/g, '');
  const expected = digest(`${options.username}:${options.password}`);
  const challenge: DashboardDenial = {
    status: 401,
    headers: { 'www-authenticate': `Basic realm="${realm}", charset="UTF-8"` },
    message: 'Sign in to use the dashboard.',
  };
  return (request: IncomingMessage) => {
    const header = request.headers.authorization ?? '';
    const match = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header);
    if (!match) return challenge;
    const given = Buffer.from(match[1], 'base64').toString('utf8');
    return timingSafeEqual(digest(given), expected) ? true : challenge;
  };
}
