import { CanceledError, ConfigurationError, CorruptRunDataError, TimeoutError } from './errors';
import type { RedisScripts } from './redis-scripts';
import { decodeJson, encodeJson, serializeError } from './serialization';
import type { StepApi, StepOptions } from './workflow';

/** Prefix of step record fields in the run hash. */
export const STEP_FIELD_PREFIX = 's:';

/**
 * A stored step record is a JSON array, short enough that small runs keep Redis's compact hash
 * encoding: `[1, seq, attempt, finishedAt, durationMs, output?]` for a step that succeeded,
 * `[0, seq, attempt, finishedAt, durationMs, error]` for one that threw.
 */
export type StepRecord = [ok: 0 | 1, seq: number, attempt: number, finishedAt: number, durationMs: number, value?: unknown];

/** Rejects a sibling step after another branch of the same attempt failed. */
export class SiblingStepFailedError extends Error {
  override name = 'SiblingStepFailedError';
}

/** What the step runtime needs from the attempt it belongs to. */
export interface AttemptContext {
  runId: string;
  token: string;
  attempt: number;
  leaseMs: number;
  maxPayloadBytes: number;
  scripts: RedisScripts;
  /** Why the attempt must stop (canceled, or the worker lost the run), once it must. */
  stopReason(): Error | undefined;
  /** Called when a checkpoint finds the run canceled or taken over. */
  onLost(code: 'canceled' | 'lost'): void;
}

/** A step whose function is running; it can be stopped from outside. */
interface InflightStep {
  controller?: AbortController;
  reject: (reason: unknown) => void;
}

const noop = () => undefined;

/**
 * The durable step API of one attempt. Completed steps come from the run hash loaded by the claim
 * (no round trip). A new step's record is sent lazily: the step resolves as soon as its function
 * returns, and the record is written either by the next step (which waits for it before running
 * anything) or inside the finish script when the handler returns first. So no step's side effects
 * run before every earlier step is durable, at one round trip per step or less.
 */
export class StepRuntime {
  readonly api: StepApi;
  /** The first step error of this attempt: what the attempt reports when siblings were aborted. */
  failure: unknown;
  private readonly calls = new Map<string, number>();
  private readonly inflight = new Set<InflightStep>();
  private pending: string[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushError: unknown;
  private flushQueued = false;
  private closed = false;
  private seq: number;

  constructor(
    private readonly ctx: AttemptContext,
    private readonly stored: Map<string, string>,
  ) {
    this.api = { run: (options, fn) => this.run(options, fn) };
    this.seq = stored.size;
  }

  /** Stops every running step at once (their signals abort and their promises reject). */
  interrupt(reason: Error): void {
    for (const step of this.inflight) this.stop(step, reason);
  }

  /** Ends the attempt's step API and returns the records the finish script must write. */
  takePending(): string[] {
    this.closed = true;
    const records = this.pending;
    this.pending = [];
    return records;
  }

  private async run<T>(options: StepOptions | string, fn: (ctx: { signal: AbortSignal }) => T | Promise<T>): Promise<T> {
    const opts = typeof options === 'string' ? { name: options } : options;
    if (!opts || typeof opts.name !== 'string' || opts.name === '') {
      throw new ConfigurationError('step.run needs a non-empty name: step.run({ name: "charge" }, fn) or step.run("charge", fn).');
    }
    // Names are assigned synchronously in call order, so replays of loops and Promise.all match.
    const count = (this.calls.get(opts.name) ?? 0) + 1;
    this.calls.set(opts.name, count);
    const name = count === 1 ? opts.name : `${opts.name}#${count}`;
    const field = STEP_FIELD_PREFIX + name;

    const stored = this.stored.get(field);
    if (stored !== undefined) {
      const record = decodeJson(stored, this.ctx.runId, `step "${name}"`) as StepRecord;
      if (record[0] === 1) return record[5] as T;
    }

    this.throwIfStopped();
    await this.durable();
    this.throwIfStopped();
    return this.execute(name, field, opts.timeoutMs, fn);
  }

  private async execute<T>(name: string, field: string, timeoutMs: number | undefined, fn: (ctx: { signal: AbortSignal }) => T | Promise<T>): Promise<T> {
    const startedAt = Date.now();
    const step: InflightStep = { reject: noop };
    // The signal is created only if the step function reads it: most steps never do.
    const stepContext = {
      get signal(): AbortSignal {
        return (step.controller ??= new AbortController()).signal;
      },
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      const result = await new Promise<T>((resolve, reject) => {
        step.reject = reject;
        this.inflight.add(step);
        if (timeoutMs !== undefined) timer = setTimeout(() => this.stop(step, new TimeoutError(`Step "${name}"`, timeoutMs)), timeoutMs);
        try {
          Promise.resolve(fn(stepContext)).then(resolve, reject);
        } catch (error) {
          reject(error);
        }
      });
      this.inflight.delete(step);
      const encoded = encodeJson(result, `The output of step "${name}"`, this.ctx.maxPayloadBytes);
      const finishedAt = Date.now();
      const head = `[1,${++this.seq},${this.ctx.attempt},${finishedAt},${finishedAt - startedAt}`;
      this.record(field, encoded === '' ? `${head}]` : `${head},${encoded}]`);
      return (encoded === '' ? undefined : JSON.parse(encoded)) as T;
    } catch (error) {
      this.inflight.delete(step);
      if (!(error instanceof SiblingStepFailedError) && !(error instanceof CanceledError) && this.failure === undefined) {
        this.failure = error;
        const finishedAt = Date.now();
        this.record(field, `[0,${++this.seq},${this.ctx.attempt},${finishedAt},${finishedAt - startedAt},${serializeError(error)}]`);
        const sibling = new SiblingStepFailedError(`A parallel step of step "${name}" failed.`);
        for (const other of this.inflight) this.stop(other, sibling);
      }
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private stop(step: InflightStep, reason: unknown): void {
    step.controller?.abort(reason);
    step.reject(reason);
  }

  private throwIfStopped(): void {
    const reason = this.ctx.stopReason();
    if (reason) throw reason;
    if (this.closed) throw new ConfigurationError(`Run "${this.ctx.runId}" already ended: a step was started after the handler returned. Await every step.`);
  }

  private record(field: string, json: string): void {
    if (this.closed) return;
    this.pending.push(field, json);
    if (!this.flushQueued) {
      this.flushQueued = true;
      // Handlers that return right after their last step carry its record in the finish script;
      // one that goes on with other work gets it written on the next turn of the event loop.
      setImmediate(() => {
        this.flushQueued = false;
        if (!this.closed && this.pending.length) void this.durable().catch(noop);
      });
    }
  }

  /** Resolves when every completed step of this attempt is stored. */
  private async durable(): Promise<void> {
    if (this.pending.length) {
      const records = this.pending;
      this.pending = [];
      this.flushing = this.flushing.then(async () => {
        if (this.flushError) return;
        try {
          const code = await this.ctx.scripts.checkpoint(this.ctx.runId, this.ctx.token, Date.now() + this.ctx.leaseMs, records);
          if (code !== 'ok') this.ctx.onLost(code);
        } catch (error) {
          this.flushError = error;
        }
      });
    }
    await this.flushing;
    if (this.flushError) throw this.flushError;
  }
}

/** Reads a stored step record into its public form. */
export function parseStepRecord(runId: string, field: string, text: string) {
  const r = decodeJson(text, runId, field) as StepRecord;
  if (!Array.isArray(r) || r.length < 5) throw new CorruptRunDataError(runId, `field "${field}" is not a step record`);
  const ok = r[0] === 1;
  return {
    name: field.slice(STEP_FIELD_PREFIX.length),
    status: ok ? ('succeeded' as const) : ('failed' as const),
    seq: r[1],
    attempt: r[2],
    finishedAt: r[3],
    startedAt: r[3] - r[4],
    ...(ok ? (r.length > 5 ? { output: r[5] } : {}) : { error: r[5] as { name: string; message: string; stack?: string } }),
  };
}
