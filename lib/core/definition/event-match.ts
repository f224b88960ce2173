import { createHash } from 'node:crypto';

import { ConfigurationError } from '../errors';
import { checkUserName, describeValue } from './option-checks';
import type { CancelOnTrigger } from './workflow-types';

/** Match values of `step.waitForEvent` and `cancelOn`: top-level payload fields and what they must equal. */
export type EventMatch = Record<string, string | number | boolean>;

/** How match values are stored: their JSON text, or a digest of it with a payload codec (store/payloads.ts). */
export interface MatchTexts {
  matchText(valueJson: string): string;
}

/**
 * The lookup key of a match, as `includes/event-waits.lua` computes it for an emitted payload:
 * the shape (field names, sorted, tab-separated) and the sha1 of the shape and each value's JSON
 * text, one per line. So an emit finds the runs waiting on its values with one lookup per shape.
 */
export function matchKey(match: unknown, what: string, payloads?: MatchTexts): { shape: string; hash: string; json: string } {
  if (match === undefined) match = {};
  if (typeof match !== 'object' || match === null || Array.isArray(match)) {
    throw new ConfigurationError(`${what} must be an object of payload fields and the values they must equal, got ${describeValue(match)}.`);
  }
  const entries = Object.entries(match as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const texts: string[] = [];
  for (const [field, value] of entries) {
    checkUserName(field, `A field name of ${what}`);
    if (!(typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)))) {
      throw new ConfigurationError(`${what} field "${field}" must be a string, a finite number or a boolean, got ${describeValue(value)}.`);
    }
    texts.push(payloads ? payloads.matchText(JSON.stringify(value)) : JSON.stringify(value));
  }
  const shape = entries.map(([field]) => field).join('\t');
  const hash = createHash('sha1')
    .update(`${shape}\n${texts.join('\n')}`)
    .digest('hex');
  return { shape, hash, json: JSON.stringify(Object.fromEntries(entries)) };
}

/**
 * The top-level scalar fields of an emitted payload, one per line ('<name>\t<value JSON>'): what an
 * emit looks waits up by. Other values (objects, arrays, null) and names with control characters
 * can never be matched, so they are left out.
 */
export function eventFields(payload: unknown, payloads?: MatchTexts): string {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) return '';
  const lines: string[] = [];
  for (const [field, value] of Object.entries(payload as Record<string, unknown>)) {
    if (field === '' || [...field].some((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)) continue;
    if (typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value)))
      lines.push(`${field}\t${payloads ? payloads.matchText(JSON.stringify(value)) : JSON.stringify(value)}`);
  }
  return lines.join('\n');
}

/**
 * The match keys of a run's `cancelOn` triggers, from its input: a field name (or list) pairs the
 * event's field with the same field of the input; a function gives the fields and values.
 */
export function cancelOnKeys(
  workflow: string,
  triggers: readonly CancelOnTrigger[],
  input: unknown,
  payloads?: MatchTexts,
): Array<{ event: string; shape: string; hash: string }> {
  return triggers.map((trigger, i) => {
    const what = `cancelOn[${i}].match of workflow "${workflow}"`;
    let match: unknown;
    if (typeof trigger.match === 'function') match = trigger.match(input);
    else if (trigger.match !== undefined) {
      const fields = typeof trigger.match === 'string' ? [trigger.match] : trigger.match;
      const source = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
      match = Object.fromEntries(fields.map((field) => [field, source[field]]));
    }
    const { shape, hash } = matchKey(match, what, payloads);
    return { event: trigger.event, shape, hash };
  });
}
