/** The option objects of a workflow's flow control (`WorkflowOptions`): keys, limits, batches. */
import type { Duration } from './duration-format';

/** A key derived from the input: a fixed string or a function of the input. */
export type KeyFrom<TInput> = string | ((input: TInput) => string);

/** Debounce: collapse repeated starts with the same key into one run, started after a quiet period. */
export interface DebounceOptions<TInput = any> {
  /** Quiet period: each new start within it restarts it and replaces the input. */
  period: Duration;
  /** Start no later than this after the first start, even if starts keep coming. */
  timeout?: Duration;
  key: KeyFrom<TInput>;
}

/** Batches of events (`WorkflowOptions.batch`). */
export interface BatchOptions {
  /** Most events in one batch: an integer from 1 to 1000. A full batch starts at once. */
  maxSize: number;
  /** How long after its first event a batch that is not full starts (a duration such as `'10s'`). */
  timeout: Duration;
  /** A top-level field of the payloads (a string, number or boolean): events with different values batch apart. */
  key?: string;
}

/** A keyed concurrency limit (`WorkflowOptions.concurrency`). */
export interface ConcurrencyOptions<TInput = any> {
  /** The key runs are counted by: a fixed string or a function of the input. */
  key: KeyFrom<TInput>;
  /** Most runs of one key running at once, fleet-wide: an integer >= 1. */
  limit: number;
  /**
   * Whose runs share a key's count: this workflow's (`'workflow'`), or those of every workflow of
   * its queue that uses `scope: 'queue'` (give them the same limit). @default 'workflow'
   */
  scope?: 'workflow' | 'queue';
}

/** At most `limit` runs per `period` for one key (`throttle`, `rateLimit`). */
export interface LimitOptions<TInput = any> {
  limit: number;
  period: Duration;
  /** @default one window for the whole workflow */
  key?: KeyFrom<TInput>;
}
