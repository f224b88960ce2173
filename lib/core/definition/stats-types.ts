/** Counts of runs the client reads: the depth of a queue (`getQueueStats`) and the dashboard's overview (`stats`). */
import type { RunStatus } from './run-types';

/**
 * The depth of one queue, as `getQueueStats` reads it: a few counting commands per queue, never a
 * scan of its runs.
 */
export interface QueueStats {
  queue: string;
  /**
   * Runs waiting to be claimed: the length of the queue's ready list. A run canceled while queued
   * counts until the next claim drops its id; a run waiting for a concurrency slot or a mutex is
   * not in the list until one is free.
   */
  queued: number;
  /** Runs of the queue due later: delayed, backing off before another attempt, sleeping, or waiting with a timeout. */
  scheduled: number;
  /**
   * Runs running now of the workflows registered on this queue (Redis indexes running runs by
   * workflow, so a run started with `queueOverride` counts on its workflow's own queue).
   */
  running: number;
  /**
   * When the run at the head of the ready list became claimable (its `availableAt`, ms, in client
   * time), or null when the queue has no queued run among the first ids of its list.
   */
  oldestQueuedAt: number | null;
  /** Set while the queue is paused (`WorkflowQueues.pause`): workers claim none of its runs. */
  paused?: QueuePause;
}

/** A queue's pause: when it began (ms, client time) and the note given with it. */
export interface QueuePause {
  at: number;
  note?: string;
}

/** Options of `getQueueStats`. */
export interface QueueStatsOptions {
  /**
   * The queues to read. By default the queues of the workflows registered in Redis; queues named
   * here are read even when no workflow is registered on them.
   */
  queues?: readonly string[];
}

/** Counts for a dashboard overview. */
export interface RunStats {
  byStatus: Record<RunStatus, number>;
  byWorkflow: Record<string, number>;
  /** Runs that ended in each minute, oldest first. */
  perMinute: Array<{ minute: number; succeeded: number; failed: number }>;
}

/**
 * A live worker, from `client.listWorkers()`: what its presence call (every heartbeat) records in
 * the workers hash. Entries lapse 3 heartbeats after the last one and go when the worker stops.
 */
export interface WorkerInfo {
  workerId: string;
  host: string;
  pid: number;
  /** The queues it claims from (without their version lists). */
  queues: string[];
  /** The workflow versions it serves. */
  versions: Array<{ workflow: string; version: number }>;
  concurrency: number;
  /** Runs executing on it at its last heartbeat. */
  active: number;
  /** When it started (ms, real time). */
  startedAt: number;
  /** Its last heartbeat (ms, real time). */
  heartbeatAt: number;
  /** When its entry lapses unless renewed: 3 heartbeats after `heartbeatAt`. */
  expiresAt: number;
}
