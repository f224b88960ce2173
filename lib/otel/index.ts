/**
 * `nestjs-redflow/otel`: OpenTelemetry tracing of runs and steps, on `@opentelemetry/api` (an
 * optional peer: install it to use this entry point). Turn it on with one option:
 * `RedflowModule.forRoot({ tracing: redflowTracing() })`, or `createClient({ tracing })` and
 * `startWorker({ tracing })` in plain Node. See docs/tracing.md.
 */
import type * as OtelApi from '@opentelemetry/api';
import type { Context, Span, Tracer, TracerProvider } from '@opentelemetry/api';

import { assertKnownKeys, describeValue, optionKeys } from '../core/definition/option-checks';
import type { AttemptTraceInfo, RedflowTracing, SpanOutcome, StepTraceInfo, TraceContext, TraceSpan } from '../core/definition/tracing';
import { ConfigurationError } from '../core/errors';

export type { AttemptTraceInfo, RedflowTracing, SpanOutcome, StepTraceInfo, TraceContext, TraceSpan } from '../core/definition/tracing';

/** Options of `redflowTracing`. */
export interface RedflowTracingOptions {
  /** Where spans go. @default the global tracer provider (`trace.getTracerProvider()`, a no-op until an SDK registers one) */
  tracerProvider?: TracerProvider;
  /** The instrumentation scope name of the tracer. @default "nestjs-redflow" */
  tracerName?: string;
}

const TRACING_OPTION_KEYS = optionKeys<RedflowTracingOptions>()(['tracerProvider', 'tracerName']);

/** The span attributes, all under `redflow.`. */
export const REDFLOW_SPAN_ATTRIBUTES = {
  runId: 'redflow.run.id',
  attempt: 'redflow.run.attempt',
  workflow: 'redflow.workflow',
  queue: 'redflow.queue',
  /** How the attempt or step ended: succeeded, failed, retry, suspended, canceled, lost, abandoned. */
  outcome: 'redflow.outcome',
  /** True on an attempt that ended because the run waits (it resumes later, in the same trace). */
  suspended: 'redflow.run.suspended',
  stepName: 'redflow.step.name',
  stepAttempt: 'redflow.step.attempt',
} as const;

/** Loads the optional peer, or says which package to install. */
function loadApi(): typeof OtelApi {
  try {
    return require('@opentelemetry/api') as typeof OtelApi;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'MODULE_NOT_FOUND') throw error;
    throw new ConfigurationError(
      'redflowTracing() of "nestjs-redflow/otel" needs the package @opentelemetry/api: run "npm install @opentelemetry/api" (and an OpenTelemetry SDK to export the spans).',
    );
  }
}

/**
 * OpenTelemetry tracing for the `tracing` option of `RedflowModule`, `createClient` and
 * `startWorker`: a span `redflow.run <workflow>` per run attempt (kind CONSUMER) and a span
 * `redflow.step <name>` per try of a `step.run` function, child of its attempt's. The trace
 * context active where a run is started is stored with the run, and every attempt of the run
 * (first, retries, resumes after a wait) is a child of it: the whole run is one trace.
 * Costs next to nothing while no SDK is registered.
 */
export function redflowTracing(options: RedflowTracingOptions = {}): RedflowTracing {
  assertKnownKeys('redflowTracing options', options, TRACING_OPTION_KEYS);
  if (options.tracerName !== undefined && (typeof options.tracerName !== 'string' || !options.tracerName)) {
    throw new ConfigurationError(`redflowTracing option "tracerName" must be a non-empty string, got ${describeValue(options.tracerName)}.`);
  }
  if (options.tracerProvider !== undefined && typeof (options.tracerProvider as Partial<TracerProvider>)?.getTracer !== 'function') {
    throw new ConfigurationError(
      `redflowTracing option "tracerProvider" must be an OpenTelemetry TracerProvider (with getTracer()), got ${describeValue(options.tracerProvider)}.`,
    );
  }
  const api = loadApi();
  const name = options.tracerName ?? 'nestjs-redflow';
  // The global provider's tracer is a proxy: an SDK registered later still receives the spans.
  const tracer = (options.tracerProvider ?? api.trace.getTracerProvider()).getTracer(name);
  return new OtelTracing(api, tracer);
}

class OtelTracing implements RedflowTracing {
  constructor(
    private readonly api: typeof OtelApi,
    private readonly tracer: Tracer,
  ) {}

  /**
   * The active span's context in W3C form, built from the span context itself rather than through
   * the app's propagator: the run hash is the engine's own storage, and this way it holds a
   * traceparent whatever propagator (or none) the app registered.
   */
  inject(): TraceContext | undefined {
    const { trace, context, isSpanContextValid } = this.api;
    const spanContext = trace.getSpanContext(context.active());
    if (!spanContext || !isSpanContextValid(spanContext)) return undefined;
    const flags = (spanContext.traceFlags & 0xff).toString(16).padStart(2, '0');
    const traceparent = `00-${spanContext.traceId}-${spanContext.spanId}-${flags}`;
    const tracestate = spanContext.traceState?.serialize();
    return tracestate ? { traceparent, tracestate } : { traceparent };
  }

  startAttempt(info: AttemptTraceInfo): TraceSpan {
    const { trace, SpanKind, ROOT_CONTEXT } = this.api;
    const a = REDFLOW_SPAN_ATTRIBUTES;
    // No stored context: the run starts a trace of its own (never the worker loop's context).
    const parent = info.parent ? this.extract(info.parent) : ROOT_CONTEXT;
    const span = this.tracer.startSpan(
      `redflow.run ${info.workflow}`,
      { kind: SpanKind.CONSUMER, attributes: { [a.runId]: info.runId, [a.attempt]: info.attempt, [a.workflow]: info.workflow, [a.queue]: info.queue } },
      parent,
    );
    const active = trace.setSpan(parent, span);
    return this.handle(span, active, (step) => {
      const child = this.tracer.startSpan(
        `redflow.step ${step.step}`,
        {
          kind: SpanKind.INTERNAL,
          attributes: {
            [a.runId]: info.runId,
            [a.attempt]: info.attempt,
            [a.workflow]: info.workflow,
            [a.queue]: info.queue,
            [a.stepName]: step.step,
            [a.stepAttempt]: step.stepAttempt,
          },
        },
        active,
      );
      return this.handle(child, trace.setSpan(active, child), undefined);
    });
  }

  private extract(stored: TraceContext): Context {
    const [, traceId, spanId, flags] = stored.traceparent.split('-');
    const { trace, ROOT_CONTEXT, createTraceState } = this.api;
    return trace.setSpanContext(ROOT_CONTEXT, {
      traceId,
      spanId,
      traceFlags: parseInt(flags, 16),
      isRemote: true,
      traceState: stored.tracestate ? createTraceState(stored.tracestate) : undefined,
    });
  }

  private handle(span: Span, active: Context, startStep: ((step: StepTraceInfo) => TraceSpan) | undefined): TraceSpan {
    const { context, SpanStatusCode } = this.api;
    return {
      activate: (fn) => context.with(active, fn),
      startStep: (step) => startStep?.(step),
      end: (outcome: SpanOutcome) => {
        if (span.isRecording()) {
          span.setAttribute(REDFLOW_SPAN_ATTRIBUTES.outcome, outcome.outcome);
          if (outcome.suspended && startStep) span.setAttribute(REDFLOW_SPAN_ATTRIBUTES.suspended, true);
          if (outcome.error !== undefined) {
            const error = outcome.error;
            span.recordException(error instanceof Error ? error : String(error));
            span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? `${error.name}: ${error.message}` : String(error) });
          }
        }
        span.end();
      },
    };
  }
}
