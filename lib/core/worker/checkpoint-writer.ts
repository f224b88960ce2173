import type { AttemptContext } from './attempt-context';

const noop = () => undefined;

/** The run-hash field that says the run's journal passed `journalWarningBytes` (its size then): so it is told once per run. */
export const JOURNAL_LARGE_FIELD = 'journalLarge';

/** The size of journal text in bytes (UTF-8). */
export function journalBytes(fields: Iterable<[string, string]>): number {
  let bytes = 0;
  for (const [field, value] of fields) bytes += Buffer.byteLength(field) + Buffer.byteLength(value);
  return bytes;
}

/**
 * The write buffer of one attempt's step API. A new step's record is sent lazily: the step
 * resolves as soon as its function returns, and the record is written either by the next step
 * (which waits for `durable()` before running anything) or inside the finish script, which carries
 * what `takePending()` returns when the handler returns first. So no step's side effects run
 * before every earlier step is durable, at one round trip per step or less.
 */
export class CheckpointWriter {
  /** Every field this attempt wrote (step, tries, compensation records...), for the journal a compensation phase reads. */
  readonly written = new Map<string, string>();
  /** True once the finish script took the pending records: the step API has ended. */
  closed = false;
  private pending: string[] = [];
  private flushing: Promise<void> = Promise.resolve();
  private flushError: unknown;
  private flushQueued = false;

  /**
   * `replayOnly`: a replay that only collects compensations, which writes nothing. `bytes`: the
   * size of the journal the attempt started with.
   */
  constructor(
    private readonly ctx: AttemptContext,
    private readonly replayOnly: boolean,
    private bytes = 0,
  ) {}

  /** Whether the run was told large: read from the attempt when the journal first passes the size. */
  private warned: boolean | undefined;

  /** Adds a field to the next checkpoint. */
  record(field: string, json: string): void {
    if (this.closed || this.replayOnly) return;
    this.pending.push(field, json);
    this.written.set(field, json);
    this.bytes += Buffer.byteLength(field) + Buffer.byteLength(json);
    if (this.bytes > this.ctx.journalWarningBytes && !(this.warned ??= this.ctx.journalWarned)) {
      // Told once per run: the marker goes out with this checkpoint, and later attempts read it.
      this.warned = true;
      this.pending.push(JOURNAL_LARGE_FIELD, String(this.bytes));
      this.ctx.journalLarge(this.bytes);
    }
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
  async durable(): Promise<void> {
    if (this.pending.length) {
      const records = this.pending;
      this.pending = [];
      this.flushing = this.flushing.then(async () => {
        if (this.flushError) return;
        try {
          const code = await this.ctx.call(() => this.ctx.scripts.checkpoint(this.ctx.runId, this.ctx.token, this.ctx.clock.now(), records));
          if (code !== 'ok') this.ctx.onLost(code);
        } catch (error) {
          // Keep the records: the attempt now fails, and its finish call stores them.
          this.pending.unshift(...records);
          this.flushError = error;
        }
      });
    }
    await this.flushing;
    if (this.flushError) throw this.flushError;
  }

  /** Ends the attempt's step API and returns the records the finish script must write. */
  takePending(): string[] {
    this.closed = true;
    const records = this.pending;
    this.pending = [];
    return records;
  }
}
