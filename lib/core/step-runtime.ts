import { CanceledError, ConfigurationError, TimeoutError } from './errors';
import type { RedisScripts } from './redis-scripts';
import { decodeJson, encodeJson, serializeError } from './serialization';
import type { StepApi, StepOptions } from './workflow';

/** Prefix of step record fields in the run hash. */
export const STEP_FIELD_PREFIX = 's:';

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
  /** Aborted when the run is canceled or the worker loses it. */
  runSignal: AbortSignal;
  /** Called when a checkpoint finds the run canceled or taken over. */
  onLost(code: 'canceled' | 'lost'): void;
}

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
  private readonly failFast = new AbortController();
  private readonly calls = new Map<string, number>();
  private pending: string[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushError: unknown;
  private flushQueued = false;
  private seq: number;
  private closed = false;

  constructor(
    private readonly ctx: AttemptContext,
    private readonly stored: Map<string, string>,
  ) {
    this.api = { run: (options, fn) => this.run(options, fn) };
    this.seq = stored.size;
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
      const record = decodeJson(stored, this.ctx.runId, `step "${name}"`) as { status: string; output?: T };
      if (record.status === 'succeeded') return record.output as T;
    }

    this.throwIfStopped();
    await this.durable();
    this.throwIfStopped();
    return this.execute(name, field, opts.timeoutMs, fn);
  }

  private async execute<T>(name: string, field: string, timeoutMs: number | undefined, fn: (ctx: { signal: AbortSignal }) => T | Promise<T>): Promise<T> {
    const startedAt = Date.now();
    const controller = new AbortController();
    const abortFrom = (signal: AbortSignal) => controller.abort(signal.reason);
    const onRunAbort = () => abortFrom(this.ctx.runSignal);
    const onSiblingFailed = () => controller.abort(new SiblingStepFailedError(`Step "${name}" was stopped because a parallel step failed.`));
    this.ctx.runSignal.addEventListener('abort', onRunAbort);
    this.failFast.signal.addEventListener('abort', onSiblingFailed);
    const timer = timeoutMs === undefined ? undefined : setTimeout(() => controller.abort(new TimeoutError(`Step "${name}"`, timeoutMs)), timeoutMs);
    try {
      const aborted = new Promise<never>((_, reject) => controller.signal.addEventListener('abort', () => reject(controller.signal.reason)));
      aborted.catch(() => undefined);
      const result = await Promise.race([Promise.resolve().then(() => fn({ signal: controller.signal })), aborted]);
      const encoded = encodeJson(result, `The output of step "${name}"`, this.ctx.maxPayloadBytes);
      const output = encoded === '' ? '' : `,"output":${encoded}`;
      this.record(field, `{"status":"succeeded","seq":${++this.seq},"attempt":${this.ctx.attempt},"startedAt":${startedAt},"finishedAt":${Date.now()}${output}}`);
      return (encoded === '' ? undefined : JSON.parse(encoded)) as T;
    } catch (error) {
      if (!(error instanceof SiblingStepFailedError) && !(error instanceof CanceledError) && this.failure === undefined) {
        this.failure = error;
        this.record(field, `{"status":"failed","seq":${++this.seq},"attempt":${this.ctx.attempt},"startedAt":${startedAt},"finishedAt":${Date.now()},"error":${serializeError(error)}}`);
        this.failFast.abort();
      }
      throw error;
    } finally {
      clearTimeout(timer);
      this.ctx.runSignal.removeEventListener('abort', onRunAbort);
      this.failFast.signal.removeEventListener('abort', onSiblingFailed);
    }
  }

  private throwIfStopped(): void {
    if (this.ctx.runSignal.aborted) throw this.ctx.runSignal.reason;
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
        if (!this.closed && this.pending.length) void this.durable().catch(() => undefined);
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
