import { randomBytes } from 'node:crypto';
import { Cluster } from 'ioredis';
import { closeConnection, openConnection, type ConnectionOptions } from './connection';
import { idempotencyTtlSec, timeOption } from './duration';
import {
  CanceledError,
  ConfigurationError,
  CorruptRunDataError,
  IdempotencyConflictError,
  InputValidationError,
  OutputSerializationError,
  RunNotFoundError,
  TimeoutError,
  UnknownWorkflowError,
} from './errors';
import { RedflowKeys } from './keys';
import { RedisScripts, type RedisConnection } from './redis-scripts';
import { DEFAULT_MAX_PAYLOAD_BYTES, decodeJson, deserializeError, encodeJson, serializeError } from './serialization';
import { parseStepRecord, STEP_FIELD_PREFIX } from './step-runtime';
import { RUN_STATUSES, TERMINAL_STATUSES, type CronState, type RunState, type RunStats, type RunStatus, type StepState, type WorkflowMeta } from './types';
import { flowControlFor, type RunFlowControl } from './flow-control';
import { validateInput } from './validation';
import { cronIds, getDefaultRegistry, parseCron, type CronTrigger, type WorkflowDefinition, type WorkflowRegistry } from './workflow';

/** Options of `createClient`. */
export interface ClientOptions extends ConnectionOptions {
  /** Namespace of every key; all keys of a prefix share one Redis Cluster slot. @default process.env.REDFLOW_PREFIX ?? "redflow" */
  prefix?: string;
  /** Workflows known to this process: their schemas validate input on enqueue. @default the default registry */
  registry?: WorkflowRegistry;
  /** Largest input or step output in bytes. @default 1048576 (1 MiB) */
  maxPayloadBytes?: number;
}

/** Options of starting a run. */
export interface RunOptions {
  /** Returns the existing run for the same key (and input) instead of starting another one. */
  idempotencyKey?: string;
  /** Seconds the idempotency key is kept. @default 604800 (7 days) */
  idempotencyTtl?: number;
  /** Start no earlier than this (a Date or epoch ms); the run waits as `scheduled` until then. */
  runAt?: Date | number;
  /** Run on this queue instead of the workflow's own. */
  queueOverride?: string;
}

/** Options of `emitEvent`. */
export interface EmitEventOptions {
  /** A repeated emit with the same key (within the TTL) returns the same runs. */
  idempotencyKey?: string;
  /** Seconds the key is kept. @default 604800 (7 days) */
  idempotencyTtl?: number;
  /** Fan out at this time instead of now. */
  emitAt?: Date | number;
}

/** Filters of `listRuns`; results are newest first. */
export interface ListRunsOptions {
  workflow?: string;
  status?: RunStatus;
  /** @default 50 */
  limit?: number;
  /** @default 0 */
  offset?: number;
}

/** A started run. */
export interface RunHandle<TOutput = unknown> {
  readonly id: string;
  /** The run as stored now, or null if it no longer exists. */
  getState(): Promise<RunState<TOutput> | null>;
  /**
   * Waits for the run to end. Resolves with its output; rejects with its error when it failed,
   * `CanceledError` when canceled, `TimeoutError` after `timeoutMs`.
   */
  result(options?: { timeoutMs?: number }): Promise<TOutput>;
}

const RUN_FIELDS = [
  'workflow',
  'queue',
  'status',
  'input',
  'output',
  'error',
  'attempt',
  'maxAttempts',
  'createdAt',
  'availableAt',
  'startedAt',
  'finishedAt',
  'cancelReason',
  'idempotencyKey',
  'parent',
] as const;

/** A new run id: time-ordered, unique across processes. */
export function newRunId(): string {
  return `${Date.now().toString(36)}${randomBytes(6).toString('hex')}`;
}

function num(value: string | null | undefined): number | undefined {
  return value == null || value === '' ? undefined : Number(value);
}

/** Reads a stored run. Throws `CorruptRunDataError` when required fields are missing or undecodable. */
export function parseRun<TOutput>(id: string, f: Partial<Record<(typeof RUN_FIELDS)[number], string | null>>): RunState<TOutput> {
  if (!f.workflow || !f.queue || !f.status) throw new CorruptRunDataError(id, 'the run hash has no workflow, queue or status field');
  const run: RunState<TOutput> = {
    id,
    workflow: f.workflow,
    queue: f.queue,
    status: f.status as RunStatus,
    input: decodeJson(f.input ?? '', id, 'input'),
    attempt: num(f.attempt) ?? 0,
    maxAttempts: num(f.maxAttempts) ?? 1,
    createdAt: num(f.createdAt) ?? 0,
    availableAt: num(f.availableAt) ?? 0,
  };
  if (f.output) run.output = decodeJson(f.output, id, 'output') as TOutput;
  if (f.error) run.error = decodeJson(f.error, id, 'error') as RunState['error'];
  if (f.startedAt) run.startedAt = Number(f.startedAt);
  if (f.finishedAt) run.finishedAt = Number(f.finishedAt);
  if (f.cancelReason) run.cancelReason = f.cancelReason;
  if (f.idempotencyKey) run.idempotencyKey = f.idempotencyKey;
  if (f.parent) run.parentId = f.parent;
  return run;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Starts, inspects and cancels runs. Create one with `createClient`. */
export class WorkflowClient {
  readonly keys: RedflowKeys;
  /** @internal */
  readonly scripts: RedisScripts;
  readonly registry: WorkflowRegistry;
  readonly maxPayloadBytes: number;
  private closed = false;

  constructor(
    readonly redis: RedisConnection,
    private readonly ownsConnection: boolean,
    options: ClientOptions,
  ) {
    this.keys = new RedflowKeys(options.prefix ?? process.env.REDFLOW_PREFIX ?? 'redflow');
    this.scripts = new RedisScripts(redis, this.keys);
    this.registry = options.registry ?? getDefaultRegistry();
    this.maxPayloadBytes = options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD_BYTES;
  }

  /** Starts a run of a defined workflow. Validates input first: nothing is stored when it fails. */
  async start<TInput, TOutput>(definition: WorkflowDefinition<TInput, TOutput>, input: TInput, options?: RunOptions): Promise<RunHandle<TOutput>> {
    await validateInput(definition.name, definition.options.schema, input);
    const flow = flowControlFor(definition as WorkflowDefinition<unknown, unknown>, input);
    return this.enqueue<TOutput>(definition.name, input, options?.queueOverride ?? definition.queue, String(definition.maxAttempts), options, flow);
  }

  /**
   * Starts a run by workflow name. A workflow in this client's registry is validated locally; any
   * other must have been registered in Redis by a worker, else `UnknownWorkflowError`.
   */
  async runByName<TOutput = unknown>(name: string, input: unknown, options?: RunOptions): Promise<RunHandle<TOutput>> {
    const definition = this.registry.get(name);
    if (definition) return this.start(definition, input, options) as Promise<RunHandle<TOutput>>;
    return this.enqueue<TOutput>(name, input, options?.queueOverride ?? '', '', options, flowControlFor(undefined, input));
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
  ): Promise<RunHandle<TOutput>> {
    let encoded: string;
    try {
      encoded = encodeJson(input, `The input of workflow "${workflow}"`, this.maxPayloadBytes);
    } catch (error) {
      if (error instanceof OutputSerializationError) throw new InputValidationError(workflow, [{ message: error.message }]);
      throw error;
    }
    const now = Date.now();
    const runAt = timeOption(options.runAt, 'runAt');
    const ttl = idempotencyTtlSec(options.idempotencyTtl);
    const result = await this.scripts.enqueue({
      runId: newRunId(),
      workflow,
      queue,
      maxAttempts,
      input: encoded,
      now,
      runAt,
      idempotencyKey: options.idempotencyKey ?? '',
      idempotencyTtlSec: ttl,
      debounce: flow.debounce,
      extra: flow.extra,
    });
    if (result.kind === 'unknown') throw new UnknownWorkflowError(workflow);
    if (result.kind === 'conflict') throw new IdempotencyConflictError(workflow, options.idempotencyKey!, result.runId);
    return this.handle<TOutput>(result.runId);
  }

  /**
   * Starts a new run of an ended run's workflow with the same input, queue, attempts and
   * flow-control keys (mutex, throttle, rate limit). Returns its handle.
   */
  async rerun<TOutput = unknown>(id: string): Promise<RunHandle<TOutput>> {
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
      extra,
    });
    return this.handle<TOutput>(result.runId);
  }

  /** A handle for an existing run id. */
  handle<TOutput = unknown>(id: string): RunHandle<TOutput> {
    return {
      id,
      getState: () => this.getRun<TOutput>(id),
      result: (options) => this.waitForResult<TOutput>(id, options?.timeoutMs),
    };
  }

  private async waitForResult<TOutput>(id: string, timeoutMs?: number): Promise<TOutput> {
    const deadline = timeoutMs === undefined ? Infinity : Date.now() + timeoutMs;
    let pause = 5;
    for (;;) {
      const [status, output, error, reason] = await this.redis.hmget(this.keys.run(id), 'status', 'output', 'error', 'cancelReason');
      if (status === null) throw new RunNotFoundError(id);
      if (status === 'succeeded') return decodeJson(output ?? '', id, 'output') as TOutput;
      if (status === 'failed') throw deserializeError(error ?? '');
      if (status === 'canceled') throw new CanceledError(id, reason ?? undefined);
      const left = deadline - Date.now();
      if (left <= 0) throw new TimeoutError(`Waiting for the result of run "${id}"`, timeoutMs!);
      await sleep(Math.min(pause, left));
      pause = Math.min(pause * 2, 200);
    }
  }

  /** A run, or null when it does not exist. */
  async getRun<TOutput = unknown>(id: string): Promise<RunState<TOutput> | null> {
    const values = await this.redis.hmget(this.keys.run(id), ...RUN_FIELDS);
    if (values.every((v) => v === null)) return null;
    return parseRun<TOutput>(id, Object.fromEntries(RUN_FIELDS.map((f, i) => [f, values[i]])));
  }

  /** A run's stored steps, in the order they were stored. */
  async getRunSteps(id: string): Promise<StepState[]> {
    const hash = await this.redis.hgetall(this.keys.run(id));
    const steps: StepState[] = [];
    for (const [field, value] of Object.entries(hash)) {
      if (field.startsWith(STEP_FIELD_PREFIX)) steps.push(parseStepRecord(id, field, value));
    }
    return steps.sort((a, b) => a.seq - b.seq);
  }

  /**
   * Runs, newest first, filtered by workflow and/or status. Running runs come first, queued and
   * scheduled runs sort by creation time, ended runs by finish time.
   */
  async listRuns(options: ListRunsOptions = {}): Promise<RunState[]> {
    const limit = options.limit ?? 50;
    const offset = options.offset ?? 0;
    for (const [name, value] of [['limit', limit], ['offset', offset]] as const) {
      if (!Number.isInteger(value) || value < 0) throw new ConfigurationError(`listRuns ${name} must be a whole number >= 0, got ${value}.`);
    }
    if (limit === 0) return [];
    if (options.workflow) return this.listWorkflowRuns(options.workflow, options.status, limit, offset);
    const statuses = options.status ? [options.status] : RUN_STATUSES;
    // No index holds every run: merge the newest of each status index.
    const pipeline = this.redis.pipeline();
    for (const status of statuses) pipeline.zrevrange(this.statusIndex(status), 0, offset + limit - 1, 'WITHSCORES');
    const merged: Array<[string, number]> = [];
    for (const [error, reply] of (await pipeline.exec()) ?? []) {
      if (error) throw error;
      const flat = reply as string[];
      for (let i = 0; i < flat.length; i += 2) merged.push([flat[i], Number(flat[i + 1])]);
    }
    merged.sort((a, b) => b[1] - a[1]);
    return this.loadRuns(merged.slice(offset, offset + limit).map(([id]) => id));
  }

  /** Running runs are listed by the leases zset (newest lease first); other statuses have an index. */
  private statusIndex(status: RunStatus): string {
    return status === 'running' ? this.keys.leases() : this.keys.status(status);
  }

  private async listWorkflowRuns(workflow: string, status: RunStatus | undefined, limit: number, offset: number): Promise<RunState[]> {
    const index = this.keys.workflowRuns(workflow);
    if (!status) return this.loadRuns(await this.redis.zrevrange(index, offset, offset + limit - 1));
    const out: RunState[] = [];
    let skipped = 0;
    const page = 200;
    for (let start = 0; out.length < limit; start += page) {
      const ids = await this.redis.zrevrange(index, start, start + page - 1);
      for (const run of await this.loadRuns(ids)) {
        if (run.status !== status) continue;
        if (skipped++ < offset) continue;
        out.push(run);
        if (out.length === limit) break;
      }
      if (ids.length < page) break;
    }
    return out;
  }

  /** Reads runs by id in one round trip, skipping ids whose run no longer exists. */
  private async loadRuns(ids: string[]): Promise<RunState[]> {
    if (!ids.length) return [];
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.run(id), ...RUN_FIELDS);
    const replies = (await pipeline.exec()) ?? [];
    const runs: RunState[] = [];
    ids.forEach((id, i) => {
      const values = replies[i][1] as (string | null)[];
      if (values && values[2] !== null) runs.push(parseRun(id, Object.fromEntries(RUN_FIELDS.map((f, j) => [f, values[j]]))));
    });
    return runs;
  }

  /** Ids of the child runs a run waits or waited on (`step.runWorkflow`). */
  async getRunChildren(id: string): Promise<string[]> {
    return (await this.redis.smembers(`${this.keys.run(id)}:children`)).sort();
  }

  /**
   * Counts for an overview: runs per status, runs per workflow (as indexed), and runs that
   * succeeded or failed in each of the last `minutes` minutes (oldest first).
   */
  async getStats(options: { minutes?: number } = {}): Promise<RunStats> {
    const minutes = options.minutes ?? 60;
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
    const [defs, next] = await Promise.all([this.redis.hgetall(this.keys.cronDefs()), this.redis.zrange(this.keys.cronNext(), 0, '-1', 'WITHSCORES')]);
    const nextById = new Map<string, number>();
    for (let i = 0; i < next.length; i += 2) nextById.set(next[i], Number(next[i + 1]));
    return Object.entries(defs)
      .map(([id, json]) => {
        const def = JSON.parse(json) as { workflow: string; expression: string; timezone: string | null; input: unknown };
        return { id, workflow: def.workflow, expression: def.expression, timezone: def.timezone ?? undefined, input: def.input, nextAt: nextById.get(id) };
      })
      .sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Workflows registered in Redis by workers (or `syncRegistry`). */
  async listWorkflows(): Promise<WorkflowMeta[]> {
    const names = (await this.redis.smembers(this.keys.workflows())).sort();
    const metas = await Promise.all(names.map((n) => this.getWorkflowMeta(n)));
    return metas.filter((m): m is WorkflowMeta => m !== null);
  }

  async getWorkflowMeta(name: string): Promise<WorkflowMeta | null> {
    const h = await this.redis.hgetall(this.keys.workflow(name));
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
    const error = serializeError(new CanceledError(id, options.reason));
    const result = await this.scripts.cancel(id, Date.now(), error, options.reason ?? '');
    return result === 'ok';
  }

  /**
   * Emits an event: every workflow subscribed to it (option `event: [{ name }]`) gets a run with the
   * payload as input. Returns their run ids, or `[]` when `emitAt` is in the future (the fan-out
   * then happens when due). With `idempotencyKey`, a repeated emit returns the same runs.
   */
  async emitEvent(event: string, payload: unknown, options: EmitEventOptions = {}): Promise<string[]> {
    const { runIds } = await this.scripts.emitEvent({
      eventId: `ev${newRunId()}`,
      event,
      payload: encodeJson(payload, `The payload of event "${event}"`, this.maxPayloadBytes),
      now: Date.now(),
      emitAt: timeOption(options.emitAt, 'emitAt'),
      idempotencyKey: options.idempotencyKey ?? '',
      idempotencyTtlSec: idempotencyTtlSec(options.idempotencyTtl),
    });
    return runIds;
  }

  /** Emits an event at a later time; same as `emitEvent(event, payload, { emitAt, ... })`. */
  scheduleEvent(event: string, payload: unknown, options: EmitEventOptions & { emitAt: Date | number }): Promise<string[]> {
    return this.emitEvent(event, payload, options);
  }

  /**
   * Records the registry's workflows in Redis under `owner` (queue, limits, event subscriptions,
   * cron schedules), and removes what this owner registered before but no longer defines (unless
   * `prune: false`). Returns the removed workflow names.
   */
  async syncRegistry(registry: WorkflowRegistry, options: { owner: string; defaultMaxConcurrency?: number; prune?: boolean }): Promise<string[]> {
    if (!options.owner) throw new ConfigurationError('syncRegistry needs an owner: a stable id of the app that defines these workflows.');
    const now = Date.now();
    const entries = registry.list().map((d) => {
      const limit = d.maxConcurrency ?? options.defaultMaxConcurrency ?? 1;
      const ids = cronIds(d);
      const crons = (d.options.cron ?? []).map((trigger, i) => {
        const def = JSON.stringify({ workflow: d.name, expression: trigger.expression, timezone: trigger.timezone ?? null, input: trigger.input ?? null });
        return { id: ids[i], def, next: nextCronTick(d.name, trigger, now) };
      });
      return JSON.stringify({
        name: d.name,
        queue: d.queue,
        maxAttempts: d.maxAttempts,
        maxConcurrency: limit === Infinity ? 0 : limit,
        events: (d.options.event ?? []).map((e) => e.name),
        crons,
      });
    });
    return this.scripts.syncRegistry(options.owner, now, options.prune ?? true, entries);
  }

  /** Deletes every key of this prefix: all runs, queues and registry entries. For tests and resets. */
  async resetState(): Promise<void> {
    const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${this.keys.base.replace(/[*?[\]\\]/g, '\\$&')}*`, 'COUNT', 1000);
        cursor = next;
        if (keys.length) await node.unlink(...keys);
      } while (cursor !== '0');
    }
  }

  /** Closes the connection if this client opened it. Safe to call twice. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.ownsConnection) await closeConnection(this.redis);
  }

  /** True when a run status is final. */
  static isTerminal(status: RunStatus): boolean {
    return TERMINAL_STATUSES.has(status);
  }
}

/** Creates a client: `createClient({ url })`, `createClient({ redis })`, plus `prefix`, `registry`. */
export function createClient(options: ClientOptions = {}): WorkflowClient {
  const { redis, owned } = openConnection(options);
  return new WorkflowClient(redis, owned, options);
}

/** The first tick of a cron schedule after `after` (ms). */
export function nextCronTick(workflow: string, trigger: Pick<CronTrigger, 'expression' | 'timezone'>, after: number): number {
  const next = parseCron(workflow, trigger).nextRun(new Date(after));
  if (!next) throw new ConfigurationError(`Cron expression "${trigger.expression}" of workflow "${workflow}" has no future tick.`);
  return next.getTime();
}
