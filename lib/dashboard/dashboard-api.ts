import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';

import { isPossibleRunId } from '../core/client/client-context';
import type { WorkflowClient } from '../core/client/workflow-client';
import type { RedflowLogger } from '../core/definition/logger';
import { type AttemptState, type RunSummary } from '../core/definition/run-types';
import { CorruptRunDataError, RedisUnavailableError, RedisWriteRefusedError, RunNotEndedError, RunNotResumableError } from '../core/errors';
import { outageKind, redisAddress, withTimeout } from '../core/store/redis-health';
import type { RunExtras } from '../core/store/run-extras';
import { RunQueries } from '../core/store/run-queries';
import { BulkActions } from './dashboard-bulk-api';
import { FleetPages } from './dashboard-fleet-api';
import { DashboardHttpError, echo, runNotFound } from './dashboard-http-error';
import type { DashboardRun, ResolvedDashboardOptions } from './dashboard-options';
import { flag, param, type DashboardContext, type DashboardQuery } from './dashboard-query';
import { RunPages } from './dashboard-run-api';
import { RunsBrowser } from './dashboard-runs-api';
import { redactRun, redactSummary } from './redact';
import { checkActionRequest, CsrfTokens } from './request-checks';

/** The statuses a re-run or a resume starts from. */
const ENDED_BADLY: ReadonlySet<string> = new Set(['failed', 'canceled', 'terminated']);
/**
 * What the dashboard serves, independent of the HTTP framework: the page, its assets and the JSON
 * API, each a method that returns data or throws `DashboardHttpError`. The plain Node handler and
 * the Nest controller route requests to these methods; nothing else decides what is shown.
 */

/** How long a dashboard read waits for Redis before answering 503. */
const READ_TIMEOUT_MS = 3_000;

/** One row of the runs list: a summary, never inputs or outputs. */
export type RunRow = RunSummary;
export type { DashboardQuery } from './dashboard-query';
export { MAX_RUNS_OFFSET } from './dashboard-runs-api';
export { PAYLOAD_PREVIEW_BYTES, previewPayload, type PayloadPreview } from './dashboard-run-api';

type Asset = 'index.html' | 'app.js' | 'app.css';
const TYPES: Record<Asset, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

/** Headers of every dashboard response: everything the page loads comes from this package. */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
  'x-frame-options': 'DENY',
  'cross-origin-resource-policy': 'same-origin',
};

const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

export class DashboardApi implements DashboardContext {
  private readonly tokens: CsrfTokens;
  private readonly displayQueries: RunQueries;
  private readonly browser = new RunsBrowser(this);
  private readonly pages = new RunPages(this);
  private readonly bulkActions = new BulkActions(this);
  private readonly fleet = new FleetPages(this);
  private readonly assets = new Map<Asset, string>();
  private secret?: Promise<string>;

  constructor(
    readonly client: WorkflowClient,
    readonly options: ResolvedDashboardOptions,
    private readonly logger: RedflowLogger,
  ) {
    this.tokens = new CsrfTokens(() => this.loadSecret());
    // The run page shows what it cannot decode (no codec here, or not its key) as encrypted.
    this.displayQueries = new RunQueries(client.redis, client.keys, client.context.payloads.forDisplay());
  }

  /**
   * The page, with its base path and a fresh anti-CSRF token written in. While Redis is
   * unreachable the token is signed with this process's own secret, so the page still loads and
   * its script shows that Redis is unreachable instead of the browser showing a bare 503.
   */
  async page(base: string): Promise<{ body: string; type: string }> {
    let token: string;
    try {
      token = await this.read(() => this.tokens.issue());
    } catch (error) {
      if (outageKind(error) === undefined) throw error;
      token = this.tokens.issueLocal();
    }
    const body = this.asset('index.html')
      .replace(/__BASE__/g, escapeHtml(base))
      .replace(/__TOKEN__/g, escapeHtml(token));
    return { body, type: TYPES['index.html'] };
  }

  /** `app.js` or `app.css`. */
  file(name: 'app.js' | 'app.css'): { body: string; type: string } {
    return { body: this.asset(name), type: TYPES[name] };
  }

  meta(): { readOnly: boolean; prefix: string } {
    return { readOnly: this.options.readOnly, prefix: this.client.keys.prefix };
  }

  overview() {
    return this.read(() => this.client.getStats());
  }

  async workflows() {
    const [workflows, crons] = await this.read(() => Promise.all([this.client.listWorkflows(), this.client.listCrons()]));
    return {
      workflows: workflows.map((w) => ({ ...w, maxConcurrency: w.maxConcurrency === Infinity ? null : w.maxConcurrency })),
      crons: crons.map(({ input: _input, ...cron }) => cron),
    };
  }

  /** `GET /api/runs`: a page of run rows under the filters of docs/dashboard-api.md. */
  runs(query: DashboardQuery) {
    return this.browser.runs(query);
  }

  /** `GET /api/runs/ids`: the ids a filter selects, for bulk actions. */
  runIds(query: DashboardQuery) {
    return this.browser.ids(query);
  }

  /** `GET /api/queues`: queue depths with runs ended in the last 5 minutes (dashboard-fleet-api.ts). */
  queues() {
    return this.fleet.queues();
  }

  /** `GET /api/workers`: the live workers. */
  workers() {
    return this.fleet.workers();
  }

  /** `GET /api/versions`: per workflow, its versions with live workers and unfinished runs. */
  versions() {
    return this.fleet.versions();
  }

  /** `GET /api/schedules`: crons and runtime schedules with their next ticks and last runs. */
  schedules() {
    return this.fleet.schedules();
  }

  /** `POST /api/schedules/trigger`: a tick of a schedule now, under its overlap policy. */
  trigger(query: DashboardQuery, headers: IncomingHttpHeaders) {
    return this.fleet.trigger(query, headers);
  }

  /** `POST /api/schedules/pause` and `/resume`: pauses or resumes a schedule. */
  pauseSchedule(query: DashboardQuery, headers: IncomingHttpHeaders) {
    return this.fleet.pause(query, headers);
  }

  resumeSchedule(query: DashboardQuery, headers: IncomingHttpHeaders) {
    return this.fleet.resume(query, headers);
  }

  /** `POST /api/queues/pause` and `/resume`: pauses or resumes a queue. */
  pauseQueue(query: DashboardQuery, headers: IncomingHttpHeaders, pause: boolean) {
    return this.fleet.pauseQueue(query, headers, pause);
  }

  /** `POST /api/runs/bulk`: one action on up to 100 runs, each on its own (dashboard-bulk-api.ts). */
  bulk(query: DashboardQuery, headers: IncomingHttpHeaders) {
    return this.bulkActions.bulk(query, headers);
  }

  /** `GET /api/run`: a run's detail (dashboard-run-api.ts). */
  run(query: DashboardQuery) {
    return this.pages.run(this.runId(query));
  }

  /** `GET /api/run/history`: the run's events from the event stream, oldest first. */
  history(query: DashboardQuery) {
    return this.pages.history(this.runId(query));
  }

  /** `POST /api/run/signal`: sends a signal to a run. */
  async signal(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ sent: boolean }> {
    return this.pages.signal(await this.checkAction(query, headers), query);
  }

  /** One whole payload of a run, redacted, as a JSON download: `input`, `output`, `error` or `step:<name>`. */
  async payload(query: DashboardQuery): Promise<{ body: string; filename: string }> {
    const id = this.runId(query);
    const field = param(query, 'field') ?? '';
    const run = await this.loadRun(id);
    let value: unknown;
    if (field === 'input' || field === 'output' || field === 'error' || field === 'progress') value = run[field];
    else if (field.startsWith('step:')) value = run.steps.find((s) => s.name === field.slice(5))?.output;
    else throw new DashboardHttpError(400, 'BAD_REQUEST', 'The query parameter "field" must be input, output, error, progress or step:<name>.');
    if (value === undefined) throw new DashboardHttpError(404, 'NOT_FOUND', `Run "${echo(id)}" has no ${field}.`);
    const safe = (text: string) => text.replace(/[^A-Za-z0-9._-]+/g, '_').slice(0, 100);
    return { body: JSON.stringify(value, null, 2), filename: `${safe(id)}-${safe(field)}.json` };
  }

  /** Cancels a run that has not ended; with `compensate=1`, its completed steps' compensations run. */
  async cancel(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ canceled: boolean }> {
    const id = await this.checkAction(query, headers);
    const compensate = flag(query, 'compensate');
    await this.loadRun(id);
    return { canceled: await this.read(() => this.client.cancelRun(id, { reason: 'canceled from the dashboard', compensate })) };
  }

  /** Terminates a live run at once (no compensation, no onFailure); `terminated: false` when it had already ended. */
  async terminate(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ terminated: boolean }> {
    const id = await this.checkAction(query, headers);
    await this.loadRun(id);
    return { terminated: await this.read(() => this.client.terminate(id, { reason: 'terminated from the dashboard' })) };
  }

  /**
   * Deletes a run with everything it owns. A live run only with `force=1` (it is terminated and
   * deleted at once); without it, 409 `NOT_ENDED`.
   */
  async deleteRun(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ deleted: boolean }> {
    const id = await this.checkAction(query, headers);
    const force = flag(query, 'force');
    await this.loadRun(id);
    let deleted: boolean;
    try {
      deleted = await this.read(() => this.client.deleteRun(id, { force }));
    } catch (error) {
      if (error instanceof RunNotEndedError) {
        throw new DashboardHttpError(
          409,
          'NOT_ENDED',
          `Run "${id}" is ${error.status}: only an ended run can be deleted. Terminate it first, or delete it with force.`,
        );
      }
      throw error;
    }
    if (!deleted) throw runNotFound(id);
    return { deleted };
  }

  async rerun(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ runId: string }> {
    const id = await this.checkAction(query, headers);
    const run = await this.loadRun(id);
    if (!ENDED_BADLY.has(run.status)) {
      throw new DashboardHttpError(409, 'NOT_ENDED_BADLY', `Run "${id}" is ${run.status}: only failed, canceled or terminated runs can be re-run.`);
    }
    const handle = await this.read(() => this.client.rerun(id));
    return { runId: handle.id };
  }

  /** Resumes a failed, canceled, compensation_failed or terminated run in place; answers with its (unchanged) id. */
  async resume(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<{ runId: string }> {
    const id = await this.checkAction(query, headers);
    const run = await this.loadRun(id);
    const refused = (status: string) =>
      new DashboardHttpError(409, 'NOT_ENDED_BADLY', `Run "${id}" is ${status}: only failed, canceled, compensation_failed or terminated runs can be resumed.`);
    if (!ENDED_BADLY.has(run.status) && run.status !== 'compensation_failed') throw refused(run.status);
    let resumed: boolean;
    try {
      resumed = await this.read(() => this.client.resume(id));
    } catch (error) {
      // Another request resumed (or a worker started) it since it was read.
      if (error instanceof RunNotResumableError) throw refused(error.status);
      throw error;
    }
    if (!resumed) throw runNotFound(id);
    return { runId: id };
  }

  /**
   * The response for anything a method threw: our refusals as they are, Redis trouble as 503 with
   * a sentence the page shows, anything else as a bare 500 whose details go to the server log.
   */
  toHttpError(error: unknown): DashboardHttpError {
    if (error instanceof DashboardHttpError) return error;
    const outage = outageKind(error);
    if (outage === 'unreachable') {
      const address = error instanceof RedisUnavailableError ? error.address : redisAddress(this.client.redis);
      return new DashboardHttpError(503, 'REDIS_UNAVAILABLE', `Redis at ${address} is unreachable; the dashboard shows data again when it is back.`, {
        'retry-after': '2',
      });
    }
    if (outage === 'write-refused') {
      return new DashboardHttpError(503, 'REDIS_WRITE_REFUSED', 'Redis refuses writes (it is full or read-only); actions work again when it accepts writes.', {
        'retry-after': '5',
      });
    }
    if (error instanceof CorruptRunDataError) {
      return new DashboardHttpError(422, 'CORRUPT_RUN', `Run "${error.runId}" has corrupt data in Redis and cannot be shown.`);
    }
    const detail = error instanceof Error ? (error.stack ?? error.message) : String(error);
    this.logger.error(`The dashboard failed to answer: ${detail}`);
    return new DashboardHttpError(500, 'INTERNAL', 'The dashboard failed to answer; the server log has the details.');
  }

  private async checkAction(query: DashboardQuery, headers: IncomingHttpHeaders): Promise<string> {
    await this.checkActionHeaders(headers);
    return this.runId(query);
  }

  /** Refuses an action when the dashboard is read-only or the request lacks the anti-CSRF checks. */
  async checkActionHeaders(headers: IncomingHttpHeaders): Promise<void> {
    if (this.options.readOnly) throw new DashboardHttpError(403, 'READ_ONLY', 'The dashboard is read-only: actions are disabled.');
    await checkActionRequest(headers, this.tokens);
  }

  private runId(query: DashboardQuery): string {
    const id = param(query, 'id');
    if (id === undefined) throw new DashboardHttpError(400, 'BAD_REQUEST', 'Give the run id as the query parameter "id".');
    return id;
  }

  /** A run with its steps, masked and redacted, or 404. */
  private async loadRun(id: string): Promise<DashboardRun> {
    return (await this.loadDetail(id)).run;
  }

  /** A run with its steps (masked and redacted) and its attempts, from one read of its hash; or 404. */
  async loadDetail(id: string): Promise<{ run: DashboardRun; attempts: AttemptState[]; extras: RunExtras }> {
    const { context } = this.client;
    const detail = isPossibleRunId(id) ? await this.read(() => context.call(() => this.displayQueries.detail(id, context.clock.now()))) : null;
    if (!detail) throw runNotFound(id);
    return { run: this.redact({ ...detail.run, steps: detail.steps }), attempts: detail.attempts, extras: detail.extras };
  }

  private redact(run: DashboardRun): DashboardRun {
    return redactRun(run, this.options.redact);
  }

  /** A list row goes through the masking and `redact` too, as a run without input, output and steps. */
  redactRow(row: RunRow): RunRow {
    return redactSummary(row, this.options.redact);
  }

  /** A Redis read that answers 503 within `READ_TIMEOUT_MS` when Redis does not. */
  read<T>(fn: () => Promise<T>): Promise<T> {
    return withTimeout(fn(), READ_TIMEOUT_MS, redisAddress(this.client.redis));
  }

  /** The token secret: the option, or one random secret per prefix kept in Redis for every replica. */
  private loadSecret(): Promise<string> {
    if (this.options.secret) return Promise.resolve(this.options.secret);
    this.secret ??= (async () => {
      const secret = await this.client.context.registryQueries.dashboardSecret(() => randomBytes(32).toString('base64url'));
      if (!secret) throw new RedisWriteRefusedError('SET', 'the dashboard secret was not stored');
      return secret;
    })();
    this.secret.catch(() => (this.secret = undefined)); // try again on the next page load
    return this.secret;
  }

  private asset(name: Asset): string {
    let text = this.assets.get(name);
    if (text === undefined) {
      text = readFileSync(join(__dirname, 'assets', name), 'utf8');
      this.assets.set(name, text);
    }
    return text;
  }
}
