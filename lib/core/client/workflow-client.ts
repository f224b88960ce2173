import { randomBytes } from 'node:crypto';
import { closeConnection, openConnection, type ConnectionOptions } from '../store/connection';
import { RedisHealth, redisAddress, withTimeout, outageKind } from '../store/redis-health';
import { idempotencyTtlSec, timeOption } from '../definition/duration';
import {
  CanceledError,
  ConfigurationError,
  IdempotencyConflictError,
  RedisUnavailableError,
  RedisWriteRefusedError,
  RunNotFoundError,
  TimeoutError,
  UnknownWorkflowError,
} from '../errors';
import { RedflowKeys } from '../store/keys';
import { isRunStatus, parseRun, RUN_FIELDS, summarizeRun, SUMMARY_FIELDS } from '../store/run-record';
import { masterNodes, scanPrefix } from '../store/prefix-scan';
import {
  assertKnownKeys,
  checkDuration,
  checkIdempotencyKey,
  checkInteger,
  checkResourceName,
  checkUserName,
  EMIT_EVENT_OPTION_KEYS,
  LIST_RUNS_OPTION_KEYS,
  optionKeys,
  RUN_OPTION_KEYS,
} from '../definition/option-checks';
import { RedisScripts, type RedisConnection } from '../store/redis-scripts';
import { DEFAULT_MAX_PAYLOAD_BYTES, decodeJson, deserializeError, encodeInput, encodeJson, serializeError } from '../store/serialization';
import { parseStepRecord, STEP_FIELD_PREFIX } from '../store/step-record';
import {
  RUN_STATUSES,
  stderrLogger,
  TERMINAL_STATUSES,
  type CronState,
  type EmitEventOptions,
  type ListRunsOptions,
  type RedflowLogger,
  type RunHandle,
  type RunOptions,
  type RunState,
  type RunStats,
  type RunStatus,
  type RunSummary,
  type StepState,
  type WorkflowMeta,
} from '../definition/types';
import { dynamicFlowError, flowControlFor, registryFlowControl, type RunFlowControl } from '../definition/flow-control';
import { validateInput } from '../definition/validation';
import { checkEventName, getDefaultRegistry, type WorkflowDefinition, type WorkflowRegistry } from '../definition/workflow';
import { cronIds, decodeCron, encodeCron, nextCronTick } from '../definition/cron';

/** Options of `createClient`. */
export interface ClientOptions extends ConnectionOptions {
  /** Namespace of every key; all keys of a prefix share one Redis Cluster slot. @default process.env.REDFLOW_PREFIX ?? "redflow" */
  prefix?: string;
  /** Workflows known to this process: their schemas validate input on enqueue. @default the default registry */
  registry?: WorkflowRegistry;
  /** Largest input or step output in bytes. @default 1048576 (1 MiB) */
  maxPayloadBytes?: number;
  /**
   * How long a call waits for Redis before it rejects with `RedisUnavailableError`. A call that
   * timed out may still be applied when Redis comes back. @default 10000
   */
  commandTimeoutMs?: number;
  /**
   * Fail (ConfigurationError) instead of warning when Redis's `maxmemory-policy`, read on the
   * first connection, is not `noeviction`: any other policy lets Redis delete runs when it fills
   * up. In Nest: `redis: { requireNoEviction: true }`. @default false
   */
  requireNoEviction?: boolean;
  /** Where warnings go (Redis outages, eviction policy). @default warnings and errors to stderr */
  logger?: RedflowLogger;
}

/** Keys of `ClientOptions` (`createClient`). */
export const CLIENT_OPTION_KEYS = optionKeys<ClientOptions>()([
  'redis',
  'url',
  'prefix',
  'registry',
  'maxPayloadBytes',
  'commandTimeoutMs',
  'requireNoEviction',
  'logger',
]);

export type { EmitEventOptions, ListRunsOptions, RunHandle, RunOptions } from '../definition/types';

/** Default of `commandTimeoutMs`. */
export const DEFAULT_COMMAND_TIMEOUT_MS = 10_000;





/** A new run id: time-ordered, unique across processes. */
export function newRunId(): string {
  return `${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
}

/** The value of the `index:wfstatus` marker once the (workflow, status) index covers every run. */
const RUN_INDEX_VERSION = '1';
/** How long the marker stays taken without a chunk from its builder before another worker takes over. */
export const RUN_INDEX_LEASE_MS = 30_000;
/** Runs indexed per atomic call of the backfill (ZSCAN COUNT, so about this many). */
const RUN_INDEX_CHUNK = 500;

/** The filters of a list call, checked, with their defaults. */
function checkListOptions(options: ListRunsOptions, what: string): { workflow?: string; status?: RunStatus; limit: number; offset: number } {
  assertKnownKeys(`${what} options`, options, LIST_RUNS_OPTION_KEYS);
  if (options.status !== undefined && !isRunStatus(options.status)) {
    throw new ConfigurationError(`${what} status must be one of ${RUN_STATUSES.join(', ')}, got ${JSON.stringify(options.status)}.`);
  }
  if (options.workflow !== undefined && typeof options.workflow !== 'string') {
    throw new ConfigurationError(`${what} workflow must be a workflow name, got ${typeof options.workflow}.`);
  }
  const limit = checkInteger(options.limit ?? 50, `${what} limit`, 0, 10_000);
  const offset = checkInteger(options.offset ?? 0, `${what} offset`, 0, 1_000_000_000);
  return { workflow: options.workflow || undefined, status: options.status, limit, offset };
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A node's maxmemory-policy: CONFIG GET, or INFO memory where CONFIG is forbidden (managed Redis, ACL users). */
async function readEvictionPolicy(node: RedisConnection): Promise<string | undefined> {
  try {
    const reply = (await node.config('GET', 'maxmemory-policy')) as unknown;
    const flat = Array.isArray(reply) ? reply.map(String) : Object.entries(reply as Record<string, string>).flat();
    const i = flat.indexOf('maxmemory-policy');
    if (i >= 0 && flat[i + 1]) return flat[i + 1];
  } catch (error) {
    if (outageKind(error)) throw error;
  }
  try {
    const info = await node.info('memory');
    return /^maxmemory_policy:(\S+)/m.exec(info)?.[1];
  } catch (error) {
    if (outageKind(error)) throw error;
    return undefined;
  }
}

/** Ids are never empty, and hold no control characters: anything else cannot be a run. */
function isPossibleRunId(id: unknown): id is string {
  if (typeof id !== 'string' || id.length === 0 || id.length > 2048) return false;
  for (let i = 0; i < id.length; i++) if (id.charCodeAt(i) < 0x20 || id.charCodeAt(i) === 0x7f) return false;
  return true;
}

/** Starts, inspects and cancels runs. Create one with `createClient`. */
export class WorkflowClient {
  readonly keys: RedflowKeys;
  /** @internal */
  readonly scripts: RedisScripts;
  readonly registry: WorkflowRegistry;
  readonly maxPayloadBytes: number;
  /** How long a call waits for Redis before rejecting with RedisUnavailableError. */
  readonly commandTimeoutMs: number;
  /** Up, unreachable or refusing writes: shared with this client's worker. */
  readonly health: RedisHealth;
  readonly logger: RedflowLogger;
  private readonly requireNoEviction: boolean;
  private checked: Promise<void> | undefined;
  private closed = false;

  constructor(
    readonly redis: RedisConnection,
    private readonly ownsConnection: boolean,
    options: ClientOptions,
  ) {
    assertKnownKeys('createClient options', options, CLIENT_OPTION_KEYS);
    this.keys = new RedflowKeys(checkResourceName(options.prefix ?? process.env.REDFLOW_PREFIX ?? 'redflow', 'prefix (or REDFLOW_PREFIX)'));
    this.scripts = new RedisScripts(redis, this.keys);
    this.registry = options.registry ?? getDefaultRegistry();
    this.maxPayloadBytes = checkInteger(options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES, 'maxPayloadBytes', 1, 512 * 1024 * 1024);
    this.commandTimeoutMs = checkDuration(options.commandTimeoutMs ?? DEFAULT_COMMAND_TIMEOUT_MS, 'commandTimeoutMs', { timer: true });
    this.requireNoEviction = options.requireNoEviction ?? false;
    this.logger = options.logger ?? stderrLogger;
    this.health = new RedisHealth(redisAddress(redis), this.logger, () => this.redis.set(this.keys.probe(), String(Date.now()), 'PX', 60_000));
    if (ownsConnection) this.health.watch(redis);
  }

  /**
   * Checks Redis once per client, before its first call: warns (or, with
   * `redis.requireNoEviction`, throws ConfigurationError) when its `maxmemory-policy` lets it
   * delete keys. A worker awaits it before it starts.
   */
  ready(): Promise<void> {
    this.checked ??= withTimeout(this.checkEvictionPolicy(), this.commandTimeoutMs, this.health.address).catch((error: unknown) => {
      // A Redis that was down is checked again on the next call; a refused policy stays refused.
      if (!(error instanceof ConfigurationError)) this.checked = undefined;
      throw this.unavailable(error);
    });
    return this.checked;
  }

  private async checkEvictionPolicy(): Promise<void> {
    const nodes = await masterNodes(this.redis, this.keys);
    for (const node of nodes) {
      const policy = await readEvictionPolicy(node);
      const where = `Redis at ${redisAddress(node)}`;
      if (policy === undefined) {
        this.logger.warn(`${where} did not tell its maxmemory-policy (CONFIG GET and INFO memory were refused); make sure it is noeviction, or Redis may delete runs when it fills up.`);
        continue;
      }
      if (policy === 'noeviction') continue;
      const message = `${where} has maxmemory-policy "${policy}": when it fills up it deletes keys, and with them workflow runs, steps and the workflow registry, without a trace. Set maxmemory-policy to noeviction (CONFIG SET maxmemory-policy noeviction, redis.conf, or your provider's parameter group).`;
      if (this.requireNoEviction) throw new ConfigurationError(`${message} requireNoEviction is on, so this client refuses to use it.`);
      this.logger.warn(`${message} Pass requireNoEviction: true (in Nest: redis: { requireNoEviction: true }) to refuse to start instead of this warning.`);
    }
  }

  /**
   * Runs one client call against Redis: after the first-connection check, within
   * `commandTimeoutMs`, with connection failures turned into `RedisUnavailableError`.
   */
  private async call<T>(fn: () => Promise<T>): Promise<T> {
    try {
      await this.ready();
      return await withTimeout(fn(), this.commandTimeoutMs, this.health.address);
    } catch (error) {
      throw this.unavailable(error);
    }
  }

  private unavailable(error: unknown): unknown {
    if (error instanceof RedisUnavailableError || outageKind(error) !== 'unreachable') return error;
    return new RedisUnavailableError(this.health.address, (error as Error).message.split('\n')[0]);
  }

  /** Starts a run of a defined workflow. Validates input first: nothing is stored when it fails. */
  async start<TInput, TOutput>(definition: WorkflowDefinition<TInput, TOutput>, input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>> {
    if (!definition || typeof definition.name !== 'string' || typeof definition.handler !== 'function') {
      throw new ConfigurationError(`start() needs a workflow definition (the value defineWorkflow returned), got ${definition === null ? 'null' : typeof definition}. Use runByName() to start a workflow by name.`);
    }
    checkRunOptions(options);
    await validateInput(definition.name, definition.options.schema, input);
    const flow = flowControlFor(definition as WorkflowDefinition<unknown, unknown>, input);
    return this.enqueue<TOutput>(definition.name, input, options?.queueOverride ?? definition.queue, String(definition.maxAttempts), options, flow, true);
  }

  /**
   * Starts a run by workflow name. A workflow in this client's registry is validated locally; any
   * other must have been registered in Redis by a worker, else `UnknownWorkflowError`.
   */
  async runByName<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    if (typeof name !== 'string' || !name) throw new ConfigurationError(`runByName needs a workflow name, got ${JSON.stringify(name)}.`);
    const definition = this.registry.get(name);
    if (definition) return this.start(definition, input, options) as Promise<RunHandle<TOutput>>;
    checkRunOptions(options);
    // Without the definition here, the registry entry's static flow-control keys apply.
    return this.enqueue<TOutput>(name, input, options?.queueOverride ?? '', '', options, flowControlFor(undefined, input), false);
  }

  /** Same as `runByName`. */
  emitWorkflow<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    return this.runByName<TOutput>(name, input, options);
  }

  private async enqueue<TOutput>(
    workflow: string,
    input: unknown,
    queue: string,
    maxAttempts: string,
    options: RunOptions = {},
    flow: RunFlowControl,
    localFlow: boolean,
  ): Promise<RunHandle<TOutput>> {
    const encoded = encodeInput(workflow, input, `The input of workflow "${workflow}"`, this.maxPayloadBytes);
    const now = Date.now();
    const runAt = timeOption(options.runAt, 'runAt');
    const ttl = idempotencyTtlSec(options.idempotencyTtl);
    const result = await this.call(() => this.scripts.enqueue({
      runId: newRunId(),
      workflow,
      queue,
      maxAttempts,
      input: encoded,
      now,
      runAt,
      idempotencyKey: options.idempotencyKey === undefined ? '' : checkIdempotencyKey(options.idempotencyKey, 'idempotencyKey'),
      idempotencyTtlSec: ttl,
      debounce: flow.debounce,
      localFlow,
      extra: flow.extra,
    }));
    if (result.kind === 'unknown') throw new UnknownWorkflowError(workflow);
    if (result.kind === 'dynamic') throw dynamicFlowError(workflow);
    if (result.kind === 'conflict') throw new IdempotencyConflictError(workflow, options.idempotencyKey!, result.runId);
    return this.handle<TOutput>(result.runId);
  }

  /**
   * Starts a new run of an ended run's workflow with the same input, queue, attempts and
   * flow-control keys (mutex, throttle, rate limit). Returns its handle.
   */
  rerun<TOutput = unknown>(id: string): Promise<RunHandle<TOutput>> {
    return this.call(() => this.rerunNow<TOutput>(id));
  }

  private async rerunNow<TOutput>(id: string): Promise<RunHandle<TOutput>> {
    if (!isPossibleRunId(id)) throw new RunNotFoundError(String(id));
    const [workflow, queue, maxAttempts, input, mutex, throttle, rateLimit] = await this.redis.hmget(
      this.keys.run(id),
      'workflow',
      'queue',
      'maxAttempts',
      'input',
      'mutex',
      'throttle',
      'rateLimit',
    );
    if (!workflow || !queue) throw new RunNotFoundError(id);
    const extra: string[] = [];
    for (const [field, value] of [['mutex', mutex], ['throttle', throttle], ['rateLimit', rateLimit]] as const) if (value !== null) extra.push(field, value);
    const result = await this.scripts.enqueue({
      runId: newRunId(),
      workflow,
      queue,
      maxAttempts: maxAttempts ?? '1',
      input: input ?? '',
      now: Date.now(),
      runAt: 0,
      idempotencyKey: '',
      idempotencyTtlSec: 1,
      localFlow: true,
      extra,
    });
    return this.handle<TOutput>(result.runId);
  }

  /** A handle for an existing run id. */
  handle<TOutput = unknown>(id: string): RunHandle<TOutput> {
    return {
      id,
      getState: () => this.getRun<TOutput>(id),
      result: async (options) => {
        assertKnownKeys('result() options', options, ['timeoutMs']);
        return this.waitForResult<TOutput>(id, options?.timeoutMs);
      },
    };
  }

  /**
   * Polls the run until it ends. With `timeoutMs`, rejects with TimeoutError at the deadline
   * even while Redis does not answer; without it, a Redis that does not answer within
   * `commandTimeoutMs` rejects with RedisUnavailableError.
   */
  private async waitForResult<TOutput>(id: string, timeoutMs?: number): Promise<TOutput> {
    if (timeoutMs !== undefined) checkDuration(timeoutMs, 'result() timeoutMs', { allowZero: true, timer: true });
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    const timedOut = (why = '') => new TimeoutError(`Waiting for the result of run "${id}"${why}`, timeoutMs!);
    let pause = 5;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) throw timedOut();
      let fields: (string | null)[];
      try {
        const read = this.call(() => this.redis.hmget(this.keys.run(id), 'status', 'output', 'error', 'cancelReason'));
        fields = left === Infinity ? await read : await withTimeout(read, Math.min(left, this.commandTimeoutMs), this.health.address);
      } catch (error) {
        if (!(error instanceof RedisUnavailableError) || deadline === Infinity) throw error;
        if (Date.now() >= deadline) throw timedOut(` (Redis at ${this.health.address} did not answer)`);
        await sleep(Math.min(200, deadline - Date.now()));
        continue;
      }
      const [status, output, error, reason] = fields;
      if (status === null) throw new RunNotFoundError(id);
      if (status === 'succeeded') return decodeJson(output ?? '', id, 'output') as TOutput;
      if (status === 'failed') throw deserializeError(error ?? '');
      if (status === 'canceled') throw new CanceledError(id, reason ?? undefined);
      await sleep(Math.min(pause, Math.max(0, deadline - Date.now())));
      pause = Math.min(pause * 2, 200);
    }
  }

  /** A run, or null when it does not exist. */
  async getRun<TOutput = unknown>(id: string): Promise<RunState<TOutput> | null> {
    if (!isPossibleRunId(id)) return null;
    const values = await this.call(() => this.redis.hmget(this.keys.run(id), ...RUN_FIELDS));
    if (values.every((v) => v === null)) return null;
    return parseRun<TOutput>(id, Object.fromEntries(RUN_FIELDS.map((f, i) => [f, values[i]])));
  }

  /** A run's stored steps, in the order they were stored. */
  async getRunSteps(id: string): Promise<StepState[]> {
    if (!isPossibleRunId(id)) return [];
    const hash = await this.call(() => this.redis.hgetall(this.keys.run(id)));
    const steps: StepState[] = [];
    for (const [field, value] of Object.entries(hash)) {
      if (field.startsWith(STEP_FIELD_PREFIX)) steps.push(parseStepRecord(id, field, value));
    }
    return steps.sort((a, b) => a.seq - b.seq);
  }

  /**
   * Runs, newest first, filtered by workflow and/or status. Running runs come first, queued and
   * scheduled runs sort by creation time, ended runs by finish time. Filtered by workflow alone,
   * runs sort by creation time; filtered by workflow and status, as that status sorts, except
   * running runs, which sort by creation time too. Each page reads one index and only its runs.
   */
  listRuns(options: ListRunsOptions = {}): Promise<RunState[]> {
    return this.call(() =>
      this.listPage(options, 'listRuns', RUN_FIELDS, (id, f, pairStatus) => {
        // Listed by workflow and status, a run with an unknown status is skipped, as when this
        // list filtered the workflow's runs by status; a corrupt run still fails the list.
        if (f.status === null || (pairStatus && f.status !== pairStatus)) return undefined;
        return parseRun(id, f);
      }),
    );
  }

  /**
   * Like `listRuns` (same filters, paging and order), but reads only what a list row shows: never
   * input, output or step records. A run whose stored fields cannot be read comes back as a
   * `CorruptRunSummary` (with `corrupt` set) instead of failing the page.
   */
  listRunSummaries(options: ListRunsOptions = {}): Promise<RunSummary[]> {
    return this.call(() => this.listPage(options, 'listRunSummaries', SUMMARY_FIELDS, (id, f, _pairStatus, indexStatus) => summarizeRun(id, f, indexStatus)));
  }

  /**
   * One page of runs: the ids from one index read, then the fields of those runs in one pipeline.
   * Ids whose run no longer exists are skipped. A (workflow, status) entry whose run has another
   * status was left by an older engine during a rolling deploy: it is skipped and pruned, and the
   * page read again so that it stays full. `toRow` gets the status of a (workflow, status) page
   * (`pairStatus`) and the status of the index each run was listed from (`indexStatus`).
   */
  private async listPage<F extends string, T>(
    options: ListRunsOptions,
    what: string,
    fields: readonly F[],
    toRow: (id: string, values: Record<F, string | null>, pairStatus: RunStatus | undefined, indexStatus: RunStatus | undefined) => T | undefined,
  ): Promise<T[]> {
    const { workflow, status, limit, offset } = checkListOptions(options, what);
    if (limit === 0) return [];
    const pairStatus = workflow ? status : undefined;
    const statusAt = fields.indexOf('status' as F);
    for (let read = 1; ; read++) {
      const entries = await this.pageEntries(workflow, status, limit, offset);
      const values = await this.readRuns(entries.map((e) => e.id), fields);
      const rows: T[] = [];
      const stale: string[] = [];
      entries.forEach(({ id, indexStatus }, i) => {
        const v = values[i];
        const gone = v.every((value) => value === null);
        if (pairStatus && (gone || (v[statusAt] !== pairStatus && isRunStatus(v[statusAt])))) stale.push(id);
        else if (!gone) {
          const row = toRow(id, Object.fromEntries(fields.map((f, j) => [f, v[j]])) as Record<F, string | null>, pairStatus, indexStatus);
          if (row !== undefined) rows.push(row);
        }
      });
      if (!workflow || !pairStatus || !stale.length || read === 3 || !(await this.pruneRunIndex(pairStatus, workflow, stale))) return rows;
    }
  }

  /**
   * The ids of a page, newest first, each with the status of the index it came from (none when
   * listed by workflow alone). Workflow and status: that pair's index. Workflow: its runs index.
   * Status: its status index. Neither: the newest entries of the status indexes, merged (no index
   * holds every run).
   */
  private async pageEntries(workflow: string | undefined, status: RunStatus | undefined, limit: number, offset: number): Promise<Array<{ id: string; indexStatus?: RunStatus }>> {
    if (workflow && status) return (await this.redis.zrevrange(this.keys.workflowStatusRuns(status, workflow), offset, offset + limit - 1)).map((id) => ({ id, indexStatus: status }));
    if (workflow) return (await this.redis.zrevrange(this.keys.workflowRuns(workflow), offset, offset + limit - 1)).map((id) => ({ id }));
    if (status) return (await this.redis.zrevrange(this.statusIndex(status), offset, offset + limit - 1)).map((id) => ({ id, indexStatus: status }));
    const pipeline = this.redis.pipeline();
    for (const s of RUN_STATUSES) pipeline.zrevrange(this.statusIndex(s), 0, offset + limit - 1, 'WITHSCORES');
    const merged: Array<{ id: string; indexStatus: RunStatus; score: number }> = [];
    ((await pipeline.exec()) ?? []).forEach(([error, reply], i) => {
      if (error) throw error;
      const flat = reply as string[];
      for (let j = 0; j < flat.length; j += 2) merged.push({ id: flat[j], indexStatus: RUN_STATUSES[i], score: Number(flat[j + 1]) });
    });
    merged.sort((a, b) => b.score - a.score);
    return merged.slice(offset, offset + limit).map(({ id, indexStatus }) => ({ id, indexStatus }));
  }

  /** Running runs are listed by the leases zset (newest lease first); other statuses have an index. */
  private statusIndex(status: RunStatus): string {
    return status === 'running' ? this.keys.leases() : this.keys.status(status);
  }

  /** Fields of runs by id, in one round trip. */
  private async readRuns<F extends string>(ids: string[], fields: readonly F[]): Promise<(string | null)[][]> {
    if (!ids.length) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.run(id), ...fields);
    return ((await pipeline.exec()) ?? []).map(([error, reply]) => {
      if (error) throw error;
      return reply as (string | null)[];
    });
  }

  /**
   * Prunes stale entries of a (workflow, status) index; false when none was taken out (or Redis
   * refuses writes: the page is then shown without them, and pruned by a later read).
   */
  private async pruneRunIndex(status: RunStatus, workflow: string, ids: string[]): Promise<boolean> {
    try {
      return (await this.scripts.pruneRunIndex(status, workflow, ids)) > 0;
    } catch (error) {
      if (error instanceof RedisWriteRefusedError) return false;
      throw error;
    }
  }

  /**
   * Builds the (workflow, status) index that `listRuns` and `listRunSummaries` read, for runs
   * stored before it existed: a worker calls it when it starts. The first caller of a prefix
   * takes the `index:wfstatus` marker (with a lease, renewed by each chunk) and indexes every
   * workflow's runs, 500 per atomic call; the marker says the index is built only after the last
   * chunk. Returns `built`, `done` (built before), `busy` (another process is building it: call
   * again later, it takes over if that process stopped), or `stopped` (`stopped()` became true;
   * the marker's lease runs out and a later call starts over). With `force`, builds it again even
   * when it is built: after a rolling deploy during which workers older than the index moved runs.
   */
  backfillRunIndex(options: { force?: boolean; stopped?: () => boolean } = {}): Promise<'built' | 'done' | 'busy' | 'stopped'> {
    assertKnownKeys('backfillRunIndex options', options, ['force', 'stopped']);
    return this.backfillRunIndexNow(options.force ?? false, options.stopped ?? (() => false));
  }

  private async backfillRunIndexNow(force: boolean, stopped: () => boolean): Promise<'built' | 'done' | 'busy' | 'stopped'> {
    const marker = this.keys.workflowStatusIndexMarker();
    if (!force && (await this.call(() => this.redis.get(marker))) === RUN_INDEX_VERSION) return 'done';
    const token = `building:${randomBytes(8).toString('hex')}`;
    const taken = await this.call(() => (force ? this.redis.set(marker, token, 'PX', RUN_INDEX_LEASE_MS) : this.redis.set(marker, token, 'PX', RUN_INDEX_LEASE_MS, 'NX')));
    if (taken !== 'OK') return 'busy';
    for (const workflow of await this.call(() => this.workflowsWithRuns())) {
      let cursor = '0';
      do {
        if (stopped()) return 'stopped';
        const chunk = await this.call(() => this.scripts.backfillRunIndex({ workflow, token, leaseMs: RUN_INDEX_LEASE_MS, cursor, count: RUN_INDEX_CHUNK }));
        if (!chunk) return 'busy';
        cursor = chunk.cursor;
      } while (cursor !== '0');
    }
    await this.call(() => this.redis.set(marker, RUN_INDEX_VERSION));
    return 'built';
  }

  /** Names of the workflows that have a runs index, registered or not (a deleted workflow's runs stay). */
  private async workflowsWithRuns(): Promise<string[]> {
    const head = `${this.keys.base}wf:`;
    const names: string[] = [];
    // `wf:<name>:active` and `wf:<name>:parked` never end in ":runs"; `wfstatus:` keys do not start with "wf:".
    await scanPrefix(this.redis, this.keys, 'wf:*:runs', async (keys) => {
      for (const key of keys) names.push(key.slice(head.length, -':runs'.length));
    });
    return names.sort();
  }

  /** Ids of the child runs a run waits or waited on (`step.runWorkflow`). */
  async getRunChildren(id: string): Promise<string[]> {
    if (!isPossibleRunId(id)) return [];
    return (await this.call(() => this.redis.smembers(this.keys.children(id)))).sort();
  }

  /**
   * Counts for an overview: runs per status, runs per workflow (as indexed), and runs that
   * succeeded or failed in each of the last `minutes` minutes (oldest first).
   */
  getStats(options: { minutes?: number } = {}): Promise<RunStats> {
    return this.call(() => this.getStatsNow(options));
  }

  private async getStatsNow(options: { minutes?: number }): Promise<RunStats> {
    assertKnownKeys('getStats options', options, ['minutes']);
    const minutes = checkInteger(options.minutes ?? 60, 'getStats minutes', 1, 24 * 60);
    const workflows = (await this.redis.smembers(this.keys.workflows())).sort();
    const now = Date.now();
    const start = now - (now % 60_000) - (minutes - 1) * 60_000;
    const pipeline = this.redis.pipeline();
    for (const status of RUN_STATUSES) pipeline.zcard(this.statusIndex(status));
    for (const name of workflows) pipeline.zcard(this.keys.workflowRuns(name));
    for (const status of ['succeeded', 'failed'] as const) {
      for (let i = 0; i < minutes; i++) pipeline.zcount(this.keys.status(status), start + i * 60_000, start + (i + 1) * 60_000 - 1);
    }
    const replies = ((await pipeline.exec()) ?? []).map(([, value]) => Number(value));
    const byStatus = Object.fromEntries(RUN_STATUSES.map((s, i) => [s, replies[i]])) as Record<RunStatus, number>;
    const byWorkflow = Object.fromEntries(workflows.map((w, i) => [w, replies[RUN_STATUSES.length + i]]));
    const offset = RUN_STATUSES.length + workflows.length;
    const perMinute = Array.from({ length: minutes }, (_, i) => ({
      minute: start + i * 60_000,
      succeeded: replies[offset + i],
      failed: replies[offset + minutes + i],
    }));
    return { byStatus, byWorkflow, perMinute };
  }

  /** Cron schedules registered in Redis, with their next tick. */
  async listCrons(): Promise<CronState[]> {
    const [defs, next] = await this.call(() => Promise.all([this.redis.hgetall(this.keys.cronDefs()), this.redis.zrange(this.keys.cronNext(), 0, '-1', 'WITHSCORES')]));
    const nextById = new Map<string, number>();
    for (let i = 0; i < next.length; i += 2) nextById.set(next[i], Number(next[i + 1]));
    return Object.entries(defs)
      .map(([id, json]) => {
        const def = decodeCron(json);
        return { id, workflow: def.workflow, expression: def.expression, timezone: def.timezone ?? undefined, input: def.input, nextAt: nextById.get(id) };
      })
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Workflows registered in Redis by workers (or `syncRegistry`). */
  async listWorkflows(): Promise<WorkflowMeta[]> {
    const names = (await this.call(() => this.redis.smembers(this.keys.workflows()))).sort();
    const metas = await Promise.all(names.map((n) => this.getWorkflowMeta(n)));
    return metas.filter((m): m is WorkflowMeta => m !== null);
  }

  async getWorkflowMeta(name: string): Promise<WorkflowMeta | null> {
    const h = await this.call(() => this.redis.hgetall(this.keys.workflow(name)));
    if (!h.queue) return null;
    const list = (value: string | undefined) => (value ? value.split('\n') : []);
    const limit = Number(h.maxConcurrency ?? 0);
    return {
      name,
      queue: h.queue,
      maxAttempts: Number(h.maxAttempts),
      maxConcurrency: limit > 0 ? limit : Infinity,
      events: list(h.events),
      crons: list(h.crons),
      owner: h.owner,
      updatedAt: Number(h.updatedAt),
    };
  }

  /**
   * Cancels a run that has not ended. Queued and scheduled runs end at once; a running run's signal
   * aborts and no later step starts. Returns false when the run already ended or does not exist.
   */
  async cancelRun(id: string, options: { reason?: string } = {}): Promise<boolean> {
    assertKnownKeys('cancelRun options', options, ['reason']);
    if (options.reason !== undefined) checkUserName(options.reason, 'cancelRun reason', { max: 1000 });
    if (!isPossibleRunId(id)) return false;
    const error = serializeError(new CanceledError(id, options.reason));
    const result = await this.call(() => this.scripts.cancel(id, Date.now(), error, options.reason ?? ''));
    return result === 'ok';
  }

  /**
   * Emits an event: every workflow subscribed to it (option `event: [{ name }]`) gets a run with the
   * payload as input. Returns their run ids, or `[]` when `emitAt` is in the future (the fan-out
   * then happens when due). With `idempotencyKey`, a repeated emit returns the same runs.
   */
  async emitEvent(event: string, payload: unknown, options: EmitEventOptions = {}): Promise<string[]> {
    assertKnownKeys('emitEvent options', options, EMIT_EVENT_OPTION_KEYS);
    checkEventName(event, 'The event name of emitEvent');
    const { runIds } = await this.call(() => this.scripts.emitEvent({
      eventId: `ev${newRunId()}`,
      event,
      payload: encodeJson(payload, `The payload of event "${event}"`, this.maxPayloadBytes),
      now: Date.now(),
      emitAt: timeOption(options.emitAt, 'emitAt'),
      idempotencyKey: options.idempotencyKey === undefined ? '' : checkIdempotencyKey(options.idempotencyKey, 'emitEvent idempotencyKey'),
      idempotencyTtlSec: idempotencyTtlSec(options.idempotencyTtl),
    }));
    return runIds;
  }

  /** Emits an event at a later time; same as `emitEvent(event, payload, { emitAt, ... })`. */
  async scheduleEvent(event: string, payload: unknown, options: EmitEventOptions & { emitAt: Date | number }): Promise<string[]> {
    assertKnownKeys('scheduleEvent options', options, EMIT_EVENT_OPTION_KEYS);
    if (options?.emitAt === undefined) throw new ConfigurationError('scheduleEvent needs an emitAt option: the Date (or epoch ms) to fan the event out at.');
    return this.emitEvent(event, payload, options);
  }

  /**
   * Records the registry's workflows in Redis under `owner` (queue, limits, event subscriptions,
   * cron schedules), and removes what this owner registered before but no longer defines (unless
   * `prune: false`). Returns the removed workflow names.
   */
  async syncRegistry(registry: WorkflowRegistry, options: { owner: string; defaultMaxConcurrency?: number; prune?: boolean }): Promise<string[]> {
    assertKnownKeys('syncRegistry options', options, ['owner', 'defaultMaxConcurrency', 'prune']);
    if (!options.owner) throw new ConfigurationError('syncRegistry needs an owner: a stable id of the app that defines these workflows.');
    checkUserName(options.owner, 'syncRegistry owner');
    if (options.defaultMaxConcurrency !== undefined && options.defaultMaxConcurrency !== Infinity) {
      checkInteger(options.defaultMaxConcurrency, 'syncRegistry defaultMaxConcurrency', 1, 1_000_000);
    }
    const now = Date.now();
    const entries = registry.list().map((d) => {
      const limit = d.maxConcurrency ?? options.defaultMaxConcurrency ?? 1;
      const ids = cronIds(d);
      const crons = (d.options.cron ?? []).map((trigger, i) => {
        return { id: ids[i], def: encodeCron(d.name, trigger), next: nextCronTick(d.name, trigger, now) };
      });
      return JSON.stringify({
        name: d.name,
        queue: d.queue,
        maxAttempts: d.maxAttempts,
        maxConcurrency: limit === Infinity ? 0 : limit,
        events: (d.options.event ?? []).map((e) => e.name),
        crons,
        flow: registryFlowControl(d),
      });
    });
    return this.call(() => this.scripts.syncRegistry(options.owner, now, options.prune ?? true, entries));
  }

  /** Closes the connection if this client opened it. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.health.close();
    if (this.ownsConnection) await closeConnection(this.redis);
  }

  /** True when a run status is final. */
  static isTerminal(status: RunStatus): boolean {
    return TERMINAL_STATUSES.has(status);
  }
}

/** Checks the options of starting a run before anything reaches Redis. */
function checkRunOptions(options: RunOptions | undefined): void {
  assertKnownKeys('run options', options, RUN_OPTION_KEYS);
  if (!options) return;
  if (options.idempotencyKey !== undefined) checkIdempotencyKey(options.idempotencyKey, 'idempotencyKey');
  if (options.queueOverride !== undefined) checkResourceName(options.queueOverride, 'queueOverride');
}

/** Creates a client: `createClient({ url })`, `createClient({ redis })`, plus `prefix`, `registry`. */
export function createClient(options: ClientOptions = {}): WorkflowClient {
  const { redis, owned } = openConnection(options);
  return new WorkflowClient(redis, owned, options);
}

