/**
 * Tracing, as the engine sees it: a small interface that an integration implements (the
 * OpenTelemetry one is `redflowTracing()` from `nestjs-redflow/otel`), so the engine itself never
 * loads a tracing library. Without the `tracing` option nothing here runs at all.
 *
 * The engine calls it in three places: where a run is started (`inject`, whose W3C trace context is
 * stored with the run by the same script that creates it), where a worker starts an attempt
 * (`startAttempt`, given that stored context back) and around each try of a `step.run` function
 * (`TraceSpan.startStep`). Every call goes through `GuardedTracing`: what an implementation
 * throws is logged (at most once a minute) and dropped, so tracing can neither fail nor delay a run.
 */
import { ConfigurationError } from '../errors';
import type { RedflowLogger } from './logger';
import { describeValue } from './option-checks';

/** A W3C trace context (https://www.w3.org/TR/trace-context/), as HTTP headers carry it. */
export interface TraceContext {
  /** `00-<32 hex trace id>-<16 hex parent span id>-<2 hex flags>`. */
  traceparent: string;
  /** Vendor entries, `key=value` pairs separated by commas. */
  tracestate?: string;
}

/** What a run attempt's span is told about the attempt. */
export interface AttemptTraceInfo {
  runId: string;
  workflow: string;
  queue: string;
  /** The attempt of the run, 1 on its first; a resume after a wait goes on with the same attempt. */
  attempt: number;
  /** The trace context stored when the run was started, when there was one (already checked). */
  parent?: TraceContext;
}

/** What a step span is told about the step. */
export interface StepTraceInfo {
  /** The step's name, with its `#n` suffix on the n-th call of a repeated name. */
  step: string;
  /** Which try of the step this is, 1 on its first (counting the tries of earlier attempts). */
  stepAttempt: number;
}

/** How a span ends. At most one of `error` and `suspended` is set; neither means success. */
export interface SpanOutcome {
  /** What failed the attempt or the step. */
  error?: unknown;
  /** The run waits (a timer, a signal, an event, a child, a long step retry) and resumes later. */
  suspended?: boolean;
  /** A word for how the attempt ended: succeeded, failed, retry, suspended, canceled, lost, abandoned. */
  outcome: string;
}

/** An open span of a run attempt or a step. */
export interface TraceSpan {
  /**
   * Calls `fn` once, synchronously, with this span made the active one, and returns what it
   * returns: spans that user code opens inside are children of this one.
   */
  activate<T>(fn: () => T): T;
  /** Opens a child span for one try of a step; undefined for none. */
  startStep(step: StepTraceInfo): TraceSpan | undefined;
  /** Ends the span. Called once. */
  end(outcome: SpanOutcome): void;
}

/** Worker and client option `tracing`: an implementation such as `redflowTracing()` of `nestjs-redflow/otel`. */
export interface RedflowTracing {
  /**
   * The trace context active where a run is being started (an HTTP request's span, say), or
   * undefined. It is checked (`checkTraceContext`) and stored with the run; anything malformed or
   * too long is dropped.
   */
  inject(): TraceContext | undefined;
  /** Opens the span of a run attempt on a worker; undefined for none. */
  startAttempt(attempt: AttemptTraceInfo): TraceSpan | undefined;
}

/** Longest `tracestate` stored: the W3C recommendation (32 entries fit in it in practice). */
export const MAX_TRACESTATE_CHARS = 512;

/** Version 00 traceparent: trace id and span id not all zeros (checked separately). */
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;
/** tracestate: printable ASCII without controls, as the W3C grammar allows (list members and OWS). */
const TRACESTATE = /^[\x20-\x7e]*$/;

/**
 * A trace context fit to store, or undefined: a version-00 `traceparent` of exactly 55 characters
 * with non-zero ids, and a `tracestate` of printable ASCII of at most 512 characters (a longer or
 * malformed one is left out, the traceparent kept). Never throws.
 */
export function checkTraceContext(value: unknown): TraceContext | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  const { traceparent, tracestate } = value as { traceparent?: unknown; tracestate?: unknown };
  if (typeof traceparent !== 'string' || traceparent.length !== 55) return undefined;
  const match = TRACEPARENT.exec(traceparent);
  if (!match || /^0+$/.test(match[1]) || /^0+$/.test(match[2])) return undefined;
  if (typeof tracestate === 'string' && tracestate.length > 0 && tracestate.length <= MAX_TRACESTATE_CHARS && TRACESTATE.test(tracestate)) {
    return { traceparent, tracestate };
  }
  return { traceparent };
}

/** Checks the `tracing` option of createClient, startWorker or RedflowModule: an object with `inject` and `startAttempt`. */
export function checkTracingOption(value: unknown, what: string): RedflowTracing | undefined {
  if (value === undefined) return undefined;
  const tracing = value as Partial<RedflowTracing> | null;
  if (tracing === null || typeof tracing !== 'object' || typeof tracing.inject !== 'function' || typeof tracing.startAttempt !== 'function') {
    throw new ConfigurationError(
      `${what} "tracing" must be a tracing integration with inject() and startAttempt(), such as redflowTracing() from "nestjs-redflow/otel", got ${describeValue(value)}.`,
    );
  }
  return tracing as RedflowTracing;
}

/** A tracing error is logged at most this often (ms): a broken exporter must not flood the logs. */
const TRACING_ERROR_LOG_INTERVAL_MS = 60_000;

/**
 * @internal The engine's side of `RedflowTracing`: every call of the implementation is wrapped so
 * that what it throws is logged and dropped, and a trace context it returns is checked before it
 * is stored.
 */
export class GuardedTracing {
  private lastErrorAt = -Infinity;

  constructor(
    private readonly tracing: RedflowTracing,
    private readonly logger: RedflowLogger,
  ) {}

  /** The caller's trace context, checked; undefined when there is none, or it is malformed. */
  inject(): TraceContext | undefined {
    try {
      return checkTraceContext(this.tracing.inject());
    } catch (error) {
      this.failed('inject', error);
      return undefined;
    }
  }

  /** The span of an attempt, or undefined. `parent` is the run's stored trace context, checked here. */
  startAttempt(info: AttemptTraceInfo): GuardedSpan | undefined {
    try {
      const parent = info.parent && checkTraceContext(info.parent);
      const span = this.tracing.startAttempt(parent ? { ...info, parent } : { ...info, parent: undefined });
      return span ? new GuardedSpan(span, this) : undefined;
    } catch (error) {
      this.failed('startAttempt', error);
      return undefined;
    }
  }

  /** @internal Logs a tracing error, at most once per interval; the run goes on. */
  failed(call: string, error: unknown): void {
    const now = Date.now();
    if (now - this.lastErrorAt < TRACING_ERROR_LOG_INTERVAL_MS) return;
    this.lastErrorAt = now;
    this.logger.warn(
      `Tracing ${call}() threw: ${(error as Error)?.message ?? String(error)}. The run is not affected; further tracing errors within a minute are not logged.`,
    );
  }
}

/** @internal A `TraceSpan` whose calls cannot throw, and whose `end` runs once. */
export class GuardedSpan {
  private ended = false;

  constructor(
    private readonly span: TraceSpan,
    private readonly guard: GuardedTracing,
  ) {}

  /**
   * Calls `fn` exactly once with the span active. If the implementation throws before calling
   * it, `fn` runs without the span; if it throws after, what `fn` returned is kept.
   */
  activate<T>(fn: () => T): T {
    // 0: not called yet, 1: returned, 2: threw (the run's own error, passed on as it is).
    let state = 0;
    let result: T | undefined;
    let thrown: unknown;
    try {
      this.span.activate(() => {
        if (state === 0) {
          try {
            result = fn();
            state = 1;
          } catch (error) {
            thrown = error;
            state = 2;
          }
        }
        return result;
      });
    } catch (error) {
      this.guard.failed('activate', error);
    }
    if (state === 0) return fn();
    if (state === 2) throw thrown;
    return result as T;
  }

  startStep(step: StepTraceInfo): GuardedSpan | undefined {
    try {
      const span = this.span.startStep(step);
      return span ? new GuardedSpan(span, this.guard) : undefined;
    } catch (error) {
      this.guard.failed('startStep', error);
      return undefined;
    }
  }

  end(outcome: SpanOutcome): void {
    if (this.ended) return;
    this.ended = true;
    try {
      this.span.end(outcome);
    } catch (error) {
      this.guard.failed('end', error);
    }
  }
}
