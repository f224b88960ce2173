import type { Clock } from '../definition/clock';
import { MAX_TIMER_MS } from '../definition/duration-format';
import { RunTimeoutError, type CanceledError, type RunTerminatedError } from '../errors';

/**
 * Where an attempt stands, as one state:
 *
 *   running ──timeOut──▶ timed-out ──halt──▶ halted ──abandon──▶ abandoned
 *      └──────────────────halt──────────────────▲                  ▲
 *      └────────────────────────────abandon────────────────────────┘
 *
 * - `running`: the handler runs, or the attempt is ending normally.
 * - `timed-out`: the run's timeout passed; the handler was stopped with RunTimeoutError, and the
 *   run still fails through its compensations.
 * - `halted`: canceled, terminated, or another worker took the run: everything stops, the
 *   compensations too, and nothing more is decided here.
 * - `abandoned`: the worker is stopping; the run is left as it is, for another worker's reaper.
 *
 * The handler's stop reason is the first of a timeout, a cancel, a terminate or a lost lease; the
 * handler's signal (created only if the handler reads it) aborts with it. The compensations have
 * a signal of their own, aborted only by a halt.
 */
export type AttemptStateName = 'running' | 'timed-out' | 'halted' | 'abandoned';

export type HaltReason = CanceledError | RunTerminatedError;
export type HandlerStopReason = HaltReason | RunTimeoutError;

export class AttemptState {
  private handlerReason: HandlerStopReason | undefined;
  private haltReason: HaltReason | undefined;
  private isAbandoned = false;
  private handlerController: AbortController | undefined;
  private compensationController: AbortController | undefined;

  /** `onHandlerStop` stops the running steps (the step runtime's interrupt). */
  constructor(private readonly onHandlerStop: (reason: HandlerStopReason) => void) {}

  get name(): AttemptStateName {
    if (this.isAbandoned) return 'abandoned';
    if (this.haltReason) return 'halted';
    return this.handlerReason ? 'timed-out' : 'running';
  }

  /** Why the handler was stopped, if it was. */
  get stopReason(): HandlerStopReason | undefined {
    return this.handlerReason;
  }

  /** Why this worker must leave the run (canceled, terminated, lost, stopping), if it must. */
  get halted(): HaltReason | undefined {
    return this.haltReason;
  }

  get abandoned(): boolean {
    return this.isAbandoned;
  }

  /** The handler's signal: aborts with the stop reason. */
  get handlerSignal(): AbortSignal {
    if (!this.handlerController) {
      this.handlerController = new AbortController();
      if (this.handlerReason) this.handlerController.abort(this.handlerReason);
    }
    return this.handlerController.signal;
  }

  /** A signal for the compensation phase: aborts when the attempt is halted (already aborted if it is). */
  compensationSignal(): AbortSignal {
    this.compensationController = new AbortController();
    if (this.haltReason) this.compensationController.abort(this.haltReason);
    return this.compensationController.signal;
  }

  /** The worker must leave the run: stops the compensations; the first halt counts. */
  halt(reason: HaltReason): void {
    if (this.haltReason) return;
    this.haltReason = reason;
    this.compensationController?.abort(reason);
  }

  /** Stops the handler and its running steps with `reason`, unless it was stopped already. */
  stopHandler(reason: HandlerStopReason): void {
    if (this.handlerReason) return;
    this.handlerReason = reason;
    this.handlerController?.abort(reason);
    this.onHandlerStop(reason);
  }

  /** The worker is stopping: nothing more of this attempt is written. The caller halts it too. */
  abandon(): void {
    this.isAbandoned = true;
  }
}

/**
 * Runs `handler` within the run's timeout: a run claimed past its `deadline` (a waiting run woken
 * by it, or a retry due after it) fails before its handler runs; one still running when the
 * deadline passes has its handler stopped with the RunTimeoutError of `timedOut`, which fails
 * the run for good, like any final failure.
 */
export async function withinDeadline<T>(
  deadline: number,
  clock: Clock,
  state: AttemptState,
  timedOut: () => RunTimeoutError,
  handler: () => Promise<T>,
): Promise<T> {
  if (clock.now() >= deadline) throw timedOut();
  let cancel: () => void = () => undefined;
  const arm = () => {
    const left = deadline - clock.now();
    // Node.js timers overflow past MAX_TIMER_MS: a longer wait is armed again when it ends.
    if (left > 0) cancel = clock.setTimer(Math.min(left, MAX_TIMER_MS), arm);
    else state.stopHandler(timedOut());
  };
  arm();
  try {
    const output = await handler();
    if (state.stopReason instanceof RunTimeoutError) throw state.stopReason;
    return output;
  } finally {
    cancel();
  }
}
