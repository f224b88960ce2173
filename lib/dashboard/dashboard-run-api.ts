import { isPossibleRunId } from '../core/client/client-context';
import { toRunEvents, type RunEvent } from '../core/definition/run-events';
import type { AttemptState, StepState, StoredError } from '../core/definition/run-types';
import { ConfigurationError, PayloadTooLargeError, SignalBufferFullError } from '../core/errors';
import { entriesBefore } from '../core/store/event-stream-reads';
import type { RunExtras } from '../core/store/run-extras';
import { DashboardHttpError, runNotFound } from './dashboard-http-error';
import type { DashboardRun } from './dashboard-options';
import { badRequest, param, type DashboardContext, type DashboardQuery } from './dashboard-query';
import { maskSecrets } from './redact';

/** The largest part of a payload a run's detail carries; the rest is a download away. */
export const PAYLOAD_PREVIEW_BYTES = 64 * 1024;
/** The largest signal payload the dashboard sends (JSON text, bytes). */
export const MAX_SIGNAL_PAYLOAD_BYTES = 16 * 1024;
/** Stream entries a run's history reads at most, newest first. */
export const MAX_HISTORY_ENTRIES = 10_000;
const HISTORY_CHUNK = 1_000;

/** A payload in a run's detail: JSON text cut to `PAYLOAD_PREVIEW_BYTES`. */
export interface PayloadPreview {
  /** Indented JSON, whole or cut. */
  text: string;
  /** Size of the whole indented JSON. */
  bytes: number;
  truncated: boolean;
}

/** A pending wait of a step still waiting. */
export interface WaitState {
  step: string;
  kind: 'sleep' | 'signal' | 'event' | 'child' | 'any';
  /** The signal or event name. */
  name?: string;
  /** An event wait's match. */
  match?: Record<string, unknown>;
  /** When it wakes or times out (epoch ms), if it does. */
  deadline?: number;
  childRunId?: string;
  /** A race's branches. */
  branches?: RunExtras['races'][string];
}

/** What a run's detail needs from `DashboardApi`: the run, its steps (masked and redacted), attempts and extras; or 404. */
export interface RunDetailSource extends DashboardContext {
  loadDetail(id: string): Promise<{ run: DashboardRun; attempts: AttemptState[]; extras: RunExtras }>;
}

/** A stored error's stack as the page shows it (lines, not JSON), cut to 16 KiB; undefined when it has none. */
export function stackText(stack: unknown): string | undefined {
  return typeof stack === 'string' && stack ? stack.slice(0, 16 * 1024) : undefined;
}

/** Indented JSON of `value`, cut on a character boundary to `max` bytes. */
export function previewPayload(value: unknown, max = PAYLOAD_PREVIEW_BYTES): PayloadPreview {
  const text = JSON.stringify(value, null, 2) ?? '';
  const bytes = Buffer.byteLength(text);
  if (bytes <= max) return { text, bytes, truncated: false };
  return {
    text: Buffer.from(text)
      .subarray(0, max)
      .toString('utf8')
      .replace(/\uFFFD+$/, ''),
    bytes,
    truncated: true,
  };
}

const briefError = (e: StoredError | undefined) => (e === undefined ? undefined : { name: e.name, message: e.message });

/** The pending waits of the steps still waiting. */
function waitsOf(steps: StepState[], races: RunExtras['races']): WaitState[] {
  return steps
    .filter((s) => s.status === 'waiting')
    .map((s): WaitState => {
      const deadline = s.wakeAt;
      if (races[s.name]) return { step: s.name, kind: 'any', deadline, branches: races[s.name] };
      if (s.childRunId !== undefined) return { step: s.name, kind: 'child', childRunId: s.childRunId, deadline };
      if (s.signal !== undefined) return { step: s.name, kind: 'signal', name: s.signal, deadline };
      if (s.event !== undefined) return { step: s.name, kind: 'event', name: s.event, match: s.match, deadline };
      return { step: s.name, kind: 'sleep', deadline };
    });
}

/** The compensation state of a run: null when it has no compensation record and never compensated. */
function compensationOf(run: DashboardRun, extras: RunExtras) {
  const steps = Object.entries(extras.compensations).map(([step, state]) => ({ step, state, ...extras.compensationTimes[step] }));
  const state =
    run.status === 'compensating' ? 'running' : run.status === 'compensation_failed' ? 'failed' : run.compensated ? 'done' : steps.length ? 'none' : undefined;
  if (state === undefined) return null;
  return {
    state,
    steps,
    error: run.status === 'compensating' || run.status === 'compensation_failed' || run.compensated ? briefError(run.error) : undefined,
    compensationError:
      run.compensationError === undefined ? undefined : { ...briefError(run.compensationError)!, stack: stackText(run.compensationError.stack) },
  };
}

/** A run's page: its detail, its history from the event stream, and signals sent to it. */
export class RunPages {
  constructor(private readonly ctx: RunDetailSource) {}

  /** `GET /api/run`: summary fields, payloads cut to 64 KiB, attempts, steps, children, waits, values, patches, compensation. */
  async run(id: string) {
    const { run, attempts, extras } = await this.ctx.loadDetail(id);
    const children = await this.ctx.read(() => this.ctx.client.getRunChildren(run.id));
    const { input, output, error, steps, progress, compensationError, ...fields } = run;
    return {
      run: {
        ...fields,
        progress: progress === undefined ? undefined : previewPayload(progress),
        input: previewPayload(input),
        output: output === undefined ? undefined : previewPayload(output),
        error: error === undefined ? undefined : { name: error.name, message: error.message, stack: stackText(error.stack), detail: previewPayload(error) },
        compensationError: briefError(compensationError),
      },
      steps: steps.map((step: StepState) => {
        const { output: stepOutput, error: stepError, ...rest } = step;
        return {
          ...rest,
          output: stepOutput === undefined ? undefined : previewPayload(stepOutput),
          error: briefError(stepError),
          lastError: briefError(rest.lastError),
        };
      }),
      // Each attempt's end and error: a run that failed and then succeeded has its errors here.
      attempts: attempts.map(({ error: attemptError, ...attempt }) => ({
        ...attempt,
        error: attemptError === undefined ? undefined : { ...briefError(attemptError)!, stack: stackText(attemptError.stack) },
      })),
      children: children.slice(0, 200),
      moreChildren: Math.max(0, children.length - 200),
      // With a `redact` option the values are left out: `redact` receives the run without them.
      values: this.ctx.options.redact ? null : Object.fromEntries(Object.entries(maskSecrets(extras.values)).map(([k, v]) => [k, previewPayload(v)])),
      patches: extras.patches,
      deadline: run.deadline ?? null,
      waits: waitsOf(steps, extras.races),
      compensation: compensationOf(run, extras),
    };
  }

  /**
   * `GET /api/run/history`: the run's events, oldest first, from the last MAX_HISTORY_ENTRIES
   * entries of the event stream. `complete`: the scan reached the run's `run.created` event or the
   * start of the stream.
   */
  async history(id: string) {
    if (!isPossibleRunId(id)) throw runNotFound(id);
    const { client } = this.ctx;
    const key = client.keys.events();
    const events: RunEvent[] = [];
    let scanned = 0;
    let end = '+';
    let complete = false;
    while (scanned < MAX_HISTORY_ENTRIES && !complete) {
      const count = Math.min(HISTORY_CHUNK, MAX_HISTORY_ENTRIES - scanned);
      const entries = await this.ctx.read(() => client.context.call(() => entriesBefore(client.redis, key, end, count)));
      scanned += entries.length;
      for (const [entryId, flat] of entries) {
        for (const event of toRunEvents(entryId, flat).reverse()) {
          if (event.runId !== id) continue;
          events.push(this.ctx.options.redact ? { ...event, error: undefined } : event);
          if (event.type === 'run.created') complete = true;
        }
      }
      if (entries.length < count) complete = true;
      else end = `(${entries[entries.length - 1][0]}`;
    }
    return { events: events.reverse(), scanned, complete, streaming: client.eventsMaxLen > 0 };
  }

  /** `POST /api/run/signal`: sends signal `name` with `payload` (JSON text, at most 16 KiB); `sent: false` when the run ended meanwhile. */
  async signal(id: string, query: DashboardQuery): Promise<{ sent: boolean }> {
    const name = param(query, 'name');
    if (name === undefined) throw badRequest('Give the signal name as the query parameter "name".');
    const text = param(query, 'payload');
    if (text !== undefined && Buffer.byteLength(text) > MAX_SIGNAL_PAYLOAD_BYTES) {
      throw badRequest(`The query parameter "payload" must be at most ${MAX_SIGNAL_PAYLOAD_BYTES / 1024} KiB of JSON text.`);
    }
    let payload: unknown = null;
    try {
      if (text !== undefined) payload = JSON.parse(text);
    } catch {
      throw badRequest('The query parameter "payload" must be JSON text, such as {"approved":true}, "yes" or 42.');
    }
    await this.ctx.loadDetail(id);
    try {
      return { sent: await this.ctx.read(() => this.ctx.client.signal(id, name, payload)) };
    } catch (error) {
      if (error instanceof ConfigurationError || error instanceof PayloadTooLargeError) throw badRequest(error.message);
      if (error instanceof SignalBufferFullError) throw new DashboardHttpError(409, 'SIGNAL_BUFFER_FULL', error.message);
      throw error;
    }
  }
}
