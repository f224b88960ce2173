import { TERMINAL_STATUSES, type AttemptState, type FinalStatus, type RunState, type RunStatus, type StepState } from '../definition/run-types';
import { attemptsOf } from './attempt-record';
import type { RedisConnection } from './connection';
import type { RedflowKeys } from './keys';
import { PLAIN_PAYLOADS, type Payloads } from './payloads';
import { runExtrasOf, type RunExtras } from './run-extras';
import { parseRun, RUN_FIELDS } from './run-record';
import { parseStepRecord, STEP_FIELD_PREFIX, stepOfEndedRun, TRIES_FIELD_PREFIX, VALUE_FIELD_PREFIX } from './step-record';

/**
 * How a run ended: its status and what it left (output JSON, error JSON or cancel reason).
 * `payload` is undefined when the end message left it out (too large): read it from the run.
 */
export interface EndedRun {
  status: FinalStatus;
  payload?: string;
}

/** What a re-run copies from the run it repeats. */
export interface RerunSource {
  workflow: string;
  queue: string;
  maxAttempts: string;
  input: string;
  /** The run's flow-control keys and timeout, as field/value pairs of the new run. */
  extra: string[];
}

/** The run hash fields a waiter reads: the status and what each end leaves. */
const END_FIELDS = ['status', 'output', 'error', 'cancelReason'] as const;

/** The fields a re-run copies besides workflow, queue, attempts and input. */
const RERUN_EXTRA_FIELDS = ['mutex', 'throttle', 'rateLimit', 'timeout'] as const;

/** `{ status, payload }` of an ended run from its END_FIELDS, or undefined while it has not ended. */
function endedFrom([status, output, error, reason]: (string | null)[]): EndedRun | undefined {
  if (status === 'succeeded') return { status, payload: output ?? '' };
  if (status === 'failed' || status === 'compensation_failed') return { status, payload: error ?? '' };
  if (status === 'canceled') return { status, payload: reason ?? '' };
  if (status === 'terminated') return { status, payload: error ?? '' };
  return undefined;
}

/** Runs commands in one pipeline and returns their replies; the first error is thrown. */
export async function pipelineReplies(redis: RedisConnection, commands: string[][]): Promise<unknown[]> {
  if (!commands.length) return [];
  const replies = (await redis.pipeline(commands).exec()) ?? [];
  return replies.map(([error, reply]) => {
    if (error) throw error;
    return reply;
  });
}

/**
 * Reads of one run's hash and sets, for the client: the run, its steps, children, end and
 * published values. The only place outside the scripts that knows the run hash's fields.
 */
/** The run a whole hash holds, read as `run()` reads its fields. */
function runOf(id: string, hash: Record<string, string>, payloads: Payloads): RunState {
  return parseRun(id, Object.fromEntries(RUN_FIELDS.map((f) => [f, hash[f] ?? null])), payloads);
}

/** The steps a whole run hash holds, in the order they were stored; an ended run's waiting steps are interrupted. */
function stepsOf(id: string, hash: Record<string, string>, now: number, payloads: Payloads): StepState[] {
  // An ended run waits for nothing: its steps that still waited when it ended are interrupted.
  const endedAt = TERMINAL_STATUSES.has(hash.status as RunStatus) ? Number(hash.finishedAt) || 0 : undefined;
  const steps: StepState[] = [];
  for (const [field, value] of Object.entries(hash)) {
    if (!field.startsWith(STEP_FIELD_PREFIX)) continue;
    const step = parseStepRecord(id, field, value, hash[TRIES_FIELD_PREFIX + field.slice(STEP_FIELD_PREFIX.length)], now, payloads);
    steps.push(endedAt === undefined ? step : stepOfEndedRun(step, endedAt));
  }
  return steps.sort((a, b) => a.seq - b.seq);
}

export class RunQueries {
  constructor(
    private readonly redis: RedisConnection,
    private readonly keys: RedflowKeys,
    /** How payloads are stored (the `codec` option): runs, steps and values are read through it. */
    readonly payloads: Payloads = PLAIN_PAYLOADS,
  ) {}

  /** A run, or null when it does not exist. */
  async run<TOutput>(id: string): Promise<RunState<TOutput> | null> {
    const values = await this.redis.hmget(this.keys.run(id), ...RUN_FIELDS);
    if (values.every((v) => v === null)) return null;
    return parseRun<TOutput>(id, Object.fromEntries(RUN_FIELDS.map((f, i) => [f, values[i]])), this.payloads);
  }

  /** A run's stored steps, in the order they were stored; `now` dates a retry that is due. */
  async steps(id: string, now: number): Promise<StepState[]> {
    return stepsOf(id, await this.redis.hgetall(this.keys.run(id)), now, this.payloads);
  }

  /** A run's attempts, oldest first (store/attempt-record.ts); empty when the run does not exist. */
  async attempts(id: string): Promise<AttemptState[]> {
    const hash = await this.redis.hgetall(this.keys.run(id));
    return hash.status ? attemptsOf(id, hash, runOf(id, hash, this.payloads)) : [];
  }

  /** A run with its steps, attempts and extras (values, patches, compensations, races), from one read of its hash (a run's page); null when it does not exist. */
  async detail(id: string, now: number): Promise<{ run: RunState; steps: StepState[]; attempts: AttemptState[]; extras: RunExtras } | null> {
    const hash = await this.redis.hgetall(this.keys.run(id));
    if (!Object.keys(hash).length) return null;
    const run = runOf(id, hash, this.payloads);
    return { run, steps: stepsOf(id, hash, now, this.payloads), attempts: attemptsOf(id, hash, run), extras: runExtrasOf(hash, this.payloads) };
  }

  /** Ids of the child runs a run waits or waited on, sorted. */
  async children(id: string): Promise<string[]> {
    return (await this.redis.smembers(this.keys.children(id))).sort();
  }

  /** Fields of runs by id, in one round trip. */
  async fields<F extends string>(ids: string[], fields: readonly F[]): Promise<(string | null)[][]> {
    return (await pipelineReplies(
      this.redis,
      ids.map((id) => ['hmget', this.keys.run(id), ...fields]),
    )) as (string | null)[][];
  }

  /** How run `id` ended: undefined while it has not, `missing` when there is no such run. */
  async end(id: string): Promise<EndedRun | 'missing' | undefined> {
    const fields = await this.redis.hmget(this.keys.run(id), ...END_FIELDS);
    if (fields[0] === null) return 'missing';
    return endedFrom(fields);
  }

  /**
   * The ended ones of runs `ids`, read in one round trip (a pipeline: every run key has the
   * prefix's hash tag). A run that cannot be read is left out.
   */
  async ended(ids: string[]): Promise<Map<string, EndedRun>> {
    const pipeline = this.redis.pipeline();
    for (const id of ids) pipeline.hmget(this.keys.run(id), ...END_FIELDS);
    const ended = new Map<string, EndedRun>();
    ((await pipeline.exec()) ?? []).forEach(([error, fields], i) => {
      const run = error ? undefined : endedFrom(fields as (string | null)[]);
      if (run) ended.set(ids[i], run);
    });
    return ended;
  }

  /** The run's status (null: no such run) and the JSON it published under `key` (`ctx.setEvent`), or null. */
  async published(id: string, key: string): Promise<{ status: string | null; value: string | null; field: string }> {
    const field = VALUE_FIELD_PREFIX + key;
    const [status, value] = await this.redis.hmget(this.keys.run(id), 'status', field);
    return { status, value, field };
  }

  /** What a re-run of run `id` copies, or null when the run does not exist. */
  async rerunSource(id: string): Promise<RerunSource | null> {
    const key = this.keys.run(id);
    const [workflow, queue, maxAttempts, input, ...values] = await this.redis.hmget(key, 'workflow', 'queue', 'maxAttempts', 'input', ...RERUN_EXTRA_FIELDS);
    if (!workflow || !queue) return null;
    const extra: string[] = [];
    RERUN_EXTRA_FIELDS.forEach((field, i) => {
      if (values[i] !== null) extra.push(field, values[i]!);
    });
    return { workflow, queue, maxAttempts: maxAttempts ?? '1', input: input ?? '', extra };
  }
}
