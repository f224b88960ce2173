import type { IncomingHttpHeaders } from 'node:http';

import { isPossibleRunId } from '../core/client/client-context';
import { TERMINAL_STATUSES, type RunStatus } from '../core/definition/run-types';
import { RunNotEndedError, RunNotFoundError, RunNotResumableError } from '../core/errors';
import { outageKind } from '../core/store/redis-health';
import { badRequest, param, type DashboardContext, type DashboardQuery } from './dashboard-query';

/** The most run ids one bulk request takes. */
export const MAX_BULK_IDS = 100;

export type BulkAction = 'cancel' | 'terminate' | 'resume' | 'rerun' | 'delete';
const ACTIONS: readonly BulkAction[] = ['cancel', 'terminate', 'resume', 'rerun', 'delete'];

/** What a bulk action needs from `DashboardApi`: the action checks (read-only, anti-CSRF). */
export interface BulkHost extends DashboardContext {
  checkActionHeaders(headers: IncomingHttpHeaders): Promise<void>;
}

/** The answer of a bulk action: the ids it acted on, the ids it skipped and why; for `rerun`, the new run of each. */
export interface BulkResult {
  action: BulkAction;
  done: string[];
  skipped: Array<{ id: string; reason: string }>;
  started?: Record<string, string>;
}

/** The statuses each action applies to, and the sentence of a run in another. */
const APPLIES: Record<BulkAction, { to: ReadonlySet<RunStatus>; says: string }> = {
  cancel: { to: new Set(['queued', 'scheduled', 'running']), says: 'only queued, scheduled or running runs can be canceled' },
  terminate: { to: new Set(['queued', 'scheduled', 'running', 'compensating']), says: 'only runs that have not ended can be terminated' },
  resume: {
    to: new Set(['failed', 'canceled', 'compensation_failed', 'terminated']),
    says: 'only failed, canceled, compensation_failed or terminated runs can be resumed',
  },
  rerun: { to: new Set(['failed', 'canceled', 'terminated']), says: 'only failed, canceled or terminated runs can be re-run' },
  delete: { to: TERMINAL_STATUSES, says: 'only ended runs can be deleted in bulk (terminate it first)' },
};

/**
 * `POST /api/runs/bulk?action=&ids=`: one action on up to 100 runs, each on its own: a run in a
 * state the action does not apply to, or that changed meanwhile, is skipped with a reason, and
 * the others go on. Only Redis trouble fails the whole request (503).
 */
export class BulkActions {
  constructor(private readonly host: BulkHost) {}

  async bulk(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<BulkResult> {
    await this.host.checkActionHeaders(headers);
    const action = param(query, 'action') as BulkAction | undefined;
    if (!action || !ACTIONS.includes(action)) throw badRequest(`The query parameter "action" must be one of ${ACTIONS.join(', ')}.`);
    const ids = [...new Set((param(query, 'ids') ?? '').split(',').map((id) => id.trim()))].filter(Boolean);
    if (!ids.length) throw badRequest('Give the run ids as the query parameter "ids", comma-separated.');
    if (ids.length > MAX_BULK_IDS)
      throw badRequest(`The query parameter "ids" takes at most ${MAX_BULK_IDS} ids per request; send the rest in further requests.`);
    const { runQueries } = this.host.client.context;
    const valid = ids.filter(isPossibleRunId);
    const statuses = await this.host.read(() => runQueries.fields(valid, ['status'] as const));
    const statusOf = new Map(valid.map((id, i) => [id, statuses[i][0]]));
    const result: BulkResult = { action, done: [], skipped: [], ...(action === 'rerun' ? { started: {} } : {}) };
    for (const id of ids) {
      const status = statusOf.get(id);
      if (!status) {
        result.skipped.push({ id, reason: 'no such run' });
        continue;
      }
      if (!APPLIES[action].to.has(status as RunStatus)) {
        result.skipped.push({ id, reason: `it is ${status}: ${APPLIES[action].says}` });
        continue;
      }
      try {
        const reason = await this.act(action, id, result);
        if (reason === undefined) result.done.push(id);
        else result.skipped.push({ id, reason });
      } catch (error) {
        if (outageKind(error) !== undefined) throw error;
        result.skipped.push({ id, reason: skipReason(error) });
      }
    }
    return result;
  }

  /** Acts on one run: undefined when done, else why not. */
  private async act(action: BulkAction, id: string, result: BulkResult): Promise<string | undefined> {
    const { client } = this.host;
    const read = <T>(fn: () => Promise<T>) => this.host.read(fn);
    switch (action) {
      case 'cancel':
        return (await read(() => client.cancelRun(id, { reason: 'canceled from the dashboard (bulk)' })))
          ? undefined
          : 'it ended or began compensating meanwhile';
      case 'terminate':
        return (await read(() => client.terminate(id, { reason: 'terminated from the dashboard (bulk)' }))) ? undefined : 'it ended meanwhile';
      case 'resume':
        return (await read(() => client.resume(id))) ? undefined : 'no such run';
      case 'rerun':
        result.started![id] = (await read(() => client.rerun(id))).id;
        return undefined;
      case 'delete':
        return (await read(() => client.deleteRun(id))) ? undefined : 'no such run';
    }
  }
}

function skipReason(error: unknown): string {
  if (error instanceof RunNotResumableError) return `it is ${error.status} now: only failed, canceled, compensation_failed or terminated runs can be resumed`;
  if (error instanceof RunNotEndedError) return `it is ${error.status} now: only ended runs can be deleted in bulk`;
  if (error instanceof RunNotFoundError) return 'no such run';
  return error instanceof Error ? `${error.name}: ${error.message.split('\n')[0].slice(0, 200)}` : String(error);
}
