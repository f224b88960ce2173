import { isPossibleRunId } from '../core/client/client-context';
import type { ListRunsOptions, WaitingFilter } from '../core/definition/run-options';
import { RUN_STATUSES, type RunStatus, type RunSummary } from '../core/definition/run-types';
import type { BrowseIndex } from '../core/store/run-browse-queries';
import { summarizeRun, SUMMARY_FIELDS } from '../core/store/run-record';
import {
  badRequest,
  decodeCursor,
  encodeCursor,
  filterKey,
  optionalNumber,
  param,
  wholeNumber,
  type DashboardContext,
  type DashboardQuery,
} from './dashboard-query';

/**
 * The deepest offset of a list that merges several indexes or reads a time range: such a page
 * reads every entry before it in each index, so its cost grows with the offset. A list of one
 * index by rank (a workflow and a status, or one ended status) costs O(page) at any depth.
 */
export const MAX_RUNS_OFFSET = 10_000;
/** Index entries one request reads at most while filters Redis cannot apply (version, creation time) skip runs. */
export const MAX_SCANNED = 2_000;
/** The failed runs an error search reads at most, newest first: the search covers these only. */
export const MAX_ERROR_SEARCH = 1_000;
/** Entries read per round trip while a filter skips runs. */
const SCAN_CHUNK = 200;
/** `waiting` forms: a kind, or a signal or event name. */
const WAITING = /^(sleep|signal|event|child|any)$|^(signal|event):[^\s].{0,199}$/s;

/** The filters of `GET /api/runs` and `GET /api/runs/ids`, checked. */
export interface RunsFilter {
  workflow?: string;
  version?: number;
  status?: RunStatus;
  waiting?: string;
  queue?: string;
  from?: number;
  to?: number;
  q?: string;
  order: 'newest' | 'oldest';
}

/** How a search found its runs. */
export interface RunsSearch {
  by: 'id' | 'idempotencyKey' | 'error';
  /** Runs (or keys) read to answer. */
  scanned: number;
}

/** One page of a filter: rows, where the next page starts (null: none), and the search, if any. */
interface FilteredPage {
  rows: RunSummary[];
  offset: number;
  next: number | null;
  search?: RunsSearch;
  /** The workflows the filter covers (undefined: all). */
  workflows?: string[];
}

/** The run filters of a query, checked (400 with a sentence for each mistake). */
export function runsFilter(query: DashboardQuery): RunsFilter {
  const status = param(query, 'status');
  if (status && !RUN_STATUSES.includes(status as RunStatus)) throw badRequest(`Unknown status "${status}". Use one of ${RUN_STATUSES.join(', ')}.`);
  const workflow = param(query, 'workflow');
  const version = optionalNumber(query, 'version', 1, 'a workflow version (a whole number >= 1)');
  if (version !== undefined && !workflow) throw badRequest('The query parameter "version" needs "workflow": versions are per workflow.');
  const waiting = param(query, 'waiting');
  if (waiting !== undefined && !WAITING.test(waiting)) {
    throw badRequest('The query parameter "waiting" must be sleep, signal, event, child, any, signal:<name> or event:<name>.');
  }
  const from = optionalNumber(query, 'from', 0, 'a time in epoch ms');
  const to = optionalNumber(query, 'to', 0, 'a time in epoch ms');
  if (from !== undefined && to !== undefined && from >= to) throw badRequest('The query parameter "from" must be before "to".');
  const q = param(query, 'q')?.trim() || undefined;
  if (q !== undefined && q.length > 200) throw badRequest('The query parameter "q" must be at most 200 characters.');
  const order = param(query, 'order') ?? 'newest';
  if (order !== 'newest' && order !== 'oldest') throw badRequest('The query parameter "order" must be newest or oldest.');
  if (waiting !== undefined && order === 'oldest') throw badRequest('The query parameter "waiting" lists runs newest first only: leave out order=oldest.');
  return { workflow, version, status: status as RunStatus | undefined, waiting, queue: param(query, 'queue'), from, to, q, order };
}

/**
 * Pages of runs under the dashboard's filters. The (workflow or queue, status) part selects run
 * indexes, read as `listRuns` reads them (in either order, and within a creation time range
 * where an index is scored by creation); version, creation time and the error search are checked
 * on each run read, up to MAX_SCANNED entries per request. `waiting` goes to the engine's
 * `listRunSummaries`.
 */
export class RunsBrowser {
  constructor(private readonly ctx: DashboardContext) {}

  /** `GET /api/runs`. */
  async runs(query: DashboardQuery) {
    const filter = runsFilter(query);
    const limit = wholeNumber(query, 'limit', 25, 100);
    const page = await this.page(query, filter, limit);
    const totals = await this.totals(page.workflows);
    const runs = page.rows.map((row) => this.ctx.redactRow(row));
    const nextCursor = page.next === null ? null : encodeCursor(page.next, cursorKey(filter));
    return { runs, nextCursor, totals, ...(page.search ? { search: page.search } : {}), offset: page.offset, limit, hasMore: page.next !== null };
  }

  /** `GET /api/runs/ids`: up to 500 ids per page; `total` is exact only without the filters checked run by run. */
  async ids(query: DashboardQuery) {
    const filter = runsFilter(query);
    const limit = wholeNumber(query, 'limit', 500, 500) || 500;
    const page = await this.page(query, filter, limit);
    const ids = page.rows.map((row) => row.id);
    const nextCursor = page.next === null ? null : encodeCursor(page.next, cursorKey(filter));
    if (page.search?.by === 'id' || page.search?.by === 'idempotencyKey') return { ids, nextCursor, total: ids.length, totalExact: true };
    const totals = await this.totals(page.workflows);
    const total = filter.status ? totals[filter.status] : Object.values(totals).reduce((sum, n) => sum + n, 0);
    const exact = filter.version === undefined && filter.from === undefined && filter.to === undefined && !filter.q && !filter.waiting;
    return { ids, nextCursor, total, totalExact: exact };
  }

  private async page(query: DashboardQuery, filter: RunsFilter, limit: number): Promise<FilteredPage> {
    const cursor = param(query, 'cursor');
    const offset = cursor !== undefined ? decodeCursor(cursor, cursorKey(filter)) : wholeNumber(query, 'offset', 0, Number.MAX_SAFE_INTEGER);
    const workflows = await this.workflows(filter);
    if (filter.q) {
      const found = await this.findExact(filter.q, workflows);
      if (found) return { rows: found.row ? [found.row] : [], offset: 0, next: null, search: found.search, workflows };
    }
    const { browseQueries } = this.ctx.client.context;
    const indexes =
      workflows?.length === 0 ? [] : await this.ctx.read(() => browseQueries.indexes(workflows, filter.q ? (filter.status ?? 'failed') : filter.status));
    const ranged = filter.from !== undefined || filter.to !== undefined;
    if (offset > MAX_RUNS_OFFSET && (filter.waiting || indexes.length > 1 || ranged)) {
      throw badRequest(`The query parameter "offset" must be at most ${MAX_RUNS_OFFSET}: filter by workflow and status to reach older runs.`);
    }
    const needle = filter.q?.toLowerCase();
    const accept = (row: RunSummary): boolean =>
      (filter.version === undefined || row.version === filter.version) &&
      (filter.from === undefined || (row.createdAt ?? -1) >= filter.from) &&
      (filter.to === undefined || (row.createdAt ?? Infinity) < filter.to) &&
      (workflows === undefined || workflows.includes(row.workflow ?? '')) &&
      (needle === undefined || errorText(this.ctx.redactRow(row)).includes(needle));
    const checked = filter.version !== undefined || ranged || needle !== undefined || (filter.waiting !== undefined && workflows !== undefined);
    const maxScan = needle !== undefined ? Math.max(0, MAX_ERROR_SEARCH - offset) : checked ? MAX_SCANNED : Infinity;
    const fetch = filter.waiting
      ? (at: number, count: number) => this.engineRows(filter, workflows, at, count)
      : (at: number, count: number) => this.indexRows(indexes, filter, at, count);
    const scan = await scanRows(fetch, { offset, limit, chunk: checked ? SCAN_CHUNK : limit + 1, maxScan, accept });
    const search = needle !== undefined ? { by: 'error' as const, scanned: scan.scanned } : undefined;
    return { rows: scan.rows, offset, next: search && scan.next !== null && scan.next >= MAX_ERROR_SEARCH ? null : scan.next, search, workflows };
  }

  /** The workflows a filter covers: its workflow, the workflows on its queue (both: the intersection), or undefined for all. */
  private async workflows(filter: RunsFilter): Promise<string[] | undefined> {
    if (filter.queue === undefined) return filter.workflow === undefined ? undefined : [filter.workflow];
    const { browseQueries } = this.ctx.client.context;
    const onQueue = await this.ctx.read(() => browseQueries.workflowsOnQueue(filter.queue!));
    return filter.workflow === undefined ? onQueue : onQueue.filter((w) => w === filter.workflow);
  }

  /** The run a search names exactly: by id, else by idempotency key (while the key lives); undefined when neither. */
  private async findExact(q: string, workflows: string[] | undefined): Promise<{ row?: RunSummary; search: RunsSearch } | undefined> {
    const { browseQueries } = this.ctx.client.context;
    if (isPossibleRunId(q)) {
      const [row] = await this.summaries([q]);
      if (row) return { row, search: { by: 'id', scanned: 1 } };
    }
    const found = await this.ctx.read(() => browseQueries.idempotentRun(q, workflows));
    if (found.runId === undefined) return undefined;
    const [row] = await this.summaries([found.runId]);
    return { row, search: { by: 'idempotencyKey', scanned: found.keys } };
  }

  /** Summaries of runs by id, in order; a run that does not exist is left out. */
  private async summaries(ids: string[]): Promise<RunSummary[]> {
    const values = await this.ctx.read(() => this.ctx.client.context.runQueries.fields(ids, SUMMARY_FIELDS));
    return ids.flatMap((id, i) => (values[i].every((v) => v === null) ? [] : [summarizeRun(id, toFields(values[i]))]));
  }

  /** Rows `at` to `at + count` of the indexes (undefined: a run gone since, or an entry an older engine left in a (workflow, status) index). */
  private async indexRows(indexes: BrowseIndex[], filter: RunsFilter, at: number, count: number): Promise<Array<RunSummary | undefined>> {
    const { browseQueries, runQueries } = this.ctx.client.context;
    const range = { order: filter.order, offset: at, count, createdFrom: filter.from, createdBefore: filter.to };
    const entries = await this.ctx.read(() => browseQueries.entries(indexes, range));
    const values = await this.ctx.read(() =>
      runQueries.fields(
        entries.map((e) => e.id),
        SUMMARY_FIELDS,
      ),
    );
    const status = filter.q ? (filter.status ?? 'failed') : filter.status;
    return entries.map(({ id, indexStatus }, i) => {
      if (values[i].every((v) => v === null)) return undefined;
      const row = summarizeRun(id, toFields(values[i]), indexStatus);
      return status && row.status !== status ? undefined : row;
    });
  }

  /** Rows from the engine's `listRunSummaries` (the `waiting` filter is the engine's). */
  private async engineRows(filter: RunsFilter, workflows: string[] | undefined, at: number, count: number): Promise<Array<RunSummary | undefined>> {
    if (workflows?.length === 0) return [];
    const options: ListRunsOptions = {
      workflow: workflows?.length === 1 ? workflows[0] : undefined,
      status: filter.status,
      version: filter.version,
      limit: count,
      offset: at,
      waiting: filter.waiting as WaitingFilter,
    };
    return this.ctx.read(() => this.ctx.client.listRunSummaries(options));
  }

  /** Runs per status under the workflow (or queue) filter: `countRuns`, one ZCARD or a few per status. */
  private async totals(workflows: string[] | undefined): Promise<Record<RunStatus, number>> {
    const { client } = this.ctx;
    const counts = await this.ctx.read(() =>
      Promise.all(
        RUN_STATUSES.map(async (status) =>
          workflows === undefined
            ? client.countRuns({ status })
            : (await Promise.all(workflows.map((workflow) => client.countRuns({ workflow, status })))).reduce((sum, n) => sum + n, 0),
        ),
      ),
    );
    return Object.fromEntries(RUN_STATUSES.map((s, i) => [s, counts[i]])) as Record<RunStatus, number>;
  }
}

/** The filter a cursor belongs to: every parameter but the cursor, offset and limit. */
function cursorKey(f: RunsFilter): string {
  return filterKey([f.workflow, f.version, f.status, f.waiting, f.queue, f.from, f.to, f.q, f.order]);
}

function toFields(values: (string | null)[]): Record<(typeof SUMMARY_FIELDS)[number], string | null> {
  return Object.fromEntries(SUMMARY_FIELDS.map((f, j) => [f, values[j]])) as Record<(typeof SUMMARY_FIELDS)[number], string | null>;
}

/** The error of a row as the list shows it (name and the start of its message), lower case. */
function errorText(row: RunSummary): string {
  return row.error ? `${row.error.name}: ${row.error.message}`.toLowerCase() : '';
}

/**
 * Reads rows from `offset` in chunks until `limit` are accepted, the rows end, or `maxScan` were
 * read. `next` is where the next page starts (null: nothing after), `scanned` how many were read.
 */
async function scanRows(
  fetch: (at: number, count: number) => Promise<Array<RunSummary | undefined>>,
  o: { offset: number; limit: number; chunk: number; maxScan: number; accept: (row: RunSummary) => boolean },
): Promise<{ rows: RunSummary[]; next: number | null; scanned: number }> {
  const rows: RunSummary[] = [];
  let at = o.offset;
  let scanned = 0;
  if (o.limit === 0) return { rows, next: null, scanned };
  for (;;) {
    const count = Math.min(Math.max(o.chunk, o.limit + 1 - rows.length), o.maxScan - scanned);
    if (count <= 0) return { rows, next: at, scanned };
    const batch = await fetch(at, count);
    for (let i = 0; i < batch.length; i++) {
      if (rows.length === o.limit) return { rows, next: at, scanned };
      at++;
      scanned++;
      const row = batch[i];
      if (row && o.accept(row)) rows.push(row);
    }
    if (batch.length < count) return { rows, next: null, scanned };
  }
}
