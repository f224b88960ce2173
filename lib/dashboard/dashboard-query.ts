import { createHash } from 'node:crypto';

import type { WorkflowClient } from '../core/client/workflow-client';
import type { RunSummary } from '../core/definition/run-types';
import { DashboardHttpError } from './dashboard-http-error';
import type { ResolvedDashboardOptions } from './dashboard-options';

/** Query parameters as either framework hands them over. */
export type DashboardQuery = URLSearchParams | Record<string, unknown>;

/** What the parts of the API (runs, run, bulk, fleet) need from `DashboardApi`. */
export interface DashboardContext {
  readonly client: WorkflowClient;
  readonly options: ResolvedDashboardOptions;
  /** A Redis read that answers 503 within the read timeout when Redis does not. */
  read<T>(fn: () => Promise<T>): Promise<T>;
  /** A list row as a person may see it (masking and `redact`). */
  redactRow(row: RunSummary): RunSummary;
}

export function badRequest(message: string): DashboardHttpError {
  return new DashboardHttpError(400, 'BAD_REQUEST', message);
}

/** A query parameter, undefined when absent or empty; 400 when given twice. */
export function param(query: DashboardQuery, name: string): string | undefined {
  const value = query instanceof URLSearchParams ? (query.get(name) ?? undefined) : query[name];
  if (value === undefined || value === '') return undefined;
  if (typeof value !== 'string') throw badRequest(`Give the query parameter "${name}" once.`);
  return value;
}

/** A whole-number parameter >= 0, `fallback` when absent, at most `max`. */
export function wholeNumber(query: DashboardQuery, name: string, fallback: number, max: number): number {
  const text = param(query, name);
  const n = text === undefined ? fallback : Number(text);
  if (!Number.isInteger(n) || n < 0) throw badRequest(`The query parameter "${name}" must be a whole number >= 0.`);
  return Math.min(n, max);
}

/** An optional whole-number parameter (`min` and up), undefined when absent. */
export function optionalNumber(query: DashboardQuery, name: string, min: number, what: string): number | undefined {
  const text = param(query, name);
  if (text === undefined) return undefined;
  const n = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(n) || n < min) throw badRequest(`The query parameter "${name}" must be ${what}.`);
  return n;
}

/** `1`, `0` or absent, as a boolean. */
export function flag(query: DashboardQuery, name: string): boolean {
  const text = param(query, name);
  if (text !== undefined && text !== '1' && text !== '0') throw badRequest(`The query parameter "${name}" must be 1 or 0.`);
  return text === '1';
}

/** What a cursor holds: where the next page starts, and which filter it belongs to. */
interface CursorBody {
  /** Entries of the filter's index order already read (an offset: see docs/dashboard-api.md). */
  o: number;
  /** A hash of the filter, so a cursor is not used with another. */
  f: string;
}

/** A short hash of the filter parameters a cursor belongs to. */
export function filterKey(parts: readonly unknown[]): string {
  return createHash('sha1').update(JSON.stringify(parts)).digest('base64url').slice(0, 10);
}

/** The opaque `nextCursor` of a page: base64url JSON of the next offset and the filter's hash. */
export function encodeCursor(offset: number, filter: string): string {
  const body: CursorBody = { o: offset, f: filter };
  return Buffer.from(JSON.stringify(body)).toString('base64url');
}

/** The offset a cursor continues at; 400 when it is not one of ours or belongs to another filter. */
export function decodeCursor(text: string, filter: string): number {
  let body: Partial<CursorBody> | undefined;
  try {
    body = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as Partial<CursorBody>;
  } catch {
    body = undefined;
  }
  if (!body || typeof body !== 'object' || !Number.isSafeInteger(body.o) || (body.o as number) < 0 || typeof body.f !== 'string') {
    throw badRequest('The query parameter "cursor" is not a cursor this dashboard gave: start again without it.');
  }
  if (body.f !== filter) throw badRequest('The query parameter "cursor" belongs to other filters: start again without it.');
  return body.o as number;
}
