// The shapes of the API's answers, as far as the page reads them (docs/dashboard-api.md).

export const STATUSES = ['scheduled', 'queued', 'running', 'compensating', 'succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated'] as const;
export type Status = (typeof STATUSES)[number];
export const LIVE: readonly string[] = ['scheduled', 'queued', 'running', 'compensating'];
export const ENDED_BADLY: readonly string[] = ['failed', 'canceled', 'terminated'];

export interface Meta {
  readOnly: boolean;
  prefix: string;
}

export interface ErrorLine {
  name: string;
  message: string;
  stack?: string;
}

export interface WaitingFor {
  kind: 'sleep' | 'signal' | 'event' | 'child' | 'any';
  name?: string;
  until?: number;
}

export interface RunRow {
  id: string;
  workflow?: string;
  queue?: string;
  version?: number;
  status?: Status;
  attempt?: number;
  maxAttempts?: number;
  createdAt?: number;
  startedAt?: number;
  finishedAt?: number;
  durationMs?: number;
  parentId?: string;
  error?: ErrorLine;
  waitingFor?: WaitingFor;
  corrupt?: string;
}

export interface RunsPage {
  runs: RunRow[];
  nextCursor?: string | null;
  totals?: Partial<Record<Status, number>>;
  search?: { by: string; scanned?: number };
  /** Older servers: offset paging. */
  hasMore?: boolean;
}

export interface Preview {
  text: string;
  bytes: number;
  truncated: boolean;
}

export interface Try {
  startedAt: number;
  finishedAt: number;
  attempt: number;
  error?: ErrorLine;
}

export interface Step {
  name: string;
  status: 'succeeded' | 'failed' | 'waiting' | 'interrupted';
  seq: number;
  attempt: number;
  startedAt?: number;
  finishedAt?: number;
  wakeAt?: number;
  childRunId?: string;
  signal?: string;
  event?: string;
  match?: Record<string, unknown>;
  attempts?: number;
  retryAt?: number;
  output?: Preview;
  error?: ErrorLine;
  lastError?: ErrorLine;
  tries?: Try[];
}

export interface Attempt {
  attempt: number;
  outcome: string;
  finishedAt: number;
  error?: ErrorLine;
}

export interface RunDetail {
  run: RunRow & {
    status: Status;
    workflow: string;
    queue: string;
    attempt: number;
    maxAttempts: number;
    createdAt: number;
    input: Preview;
    output?: Preview;
    progress?: Preview;
    error?: ErrorLine & { detail?: Preview };
    compensationError?: ErrorLine;
    compensated?: boolean;
    cancelReason?: string;
    idempotencyKey?: string;
    timeoutAt?: number;
  };
  steps: Step[];
  attempts?: Attempt[];
  children: string[];
  moreChildren: number;
  values?: Record<string, Preview> | null;
  patches?: Record<string, boolean>;
  deadline?: number | null;
  waits?: Array<{ step: string; kind: string; name?: string; match?: Record<string, unknown>; deadline?: number; childRunId?: string }>;
  compensation?: {
    state: 'none' | 'running' | 'done' | 'failed';
    error?: ErrorLine;
    compensationError?: ErrorLine;
    steps: Array<{ step: string; state: 'due' | 'committed' | 'done'; startedAt?: number; finishedAt?: number }>;
  } | null;
}

export interface HistoryEvent {
  id: string;
  type: string;
  at?: number;
  step?: string;
  [field: string]: unknown;
}

export interface QueueRow {
  queue: string;
  queued: number;
  scheduled: number;
  running: number;
  oldestQueuedAt: number | null;
  ended5m?: number;
  paused?: boolean;
  pause?: { note?: string; at: number };
}

export interface WorkerRow {
  workerId: string;
  host?: string;
  pid?: number;
  queues?: string[];
  versions?: Array<{ workflow: string; version: number }>;
  concurrency?: number;
  active?: number;
  heartbeatAt?: number;
  startedAt?: number;
}

export interface VersionsRow {
  name: string;
  queue?: string;
  latest?: number;
  versions: Array<{ version: number; workers: string[]; unfinished?: boolean; updatedAt?: number }>;
  missing?: number[];
}

export interface ScheduleRow {
  id: string;
  source?: string;
  workflow: string;
  expression?: string;
  every?: number;
  rrule?: string;
  timezone?: string;
  nextAt?: number;
  next?: number[];
  lastRuns?: RunRow[];
  policies?: { missed?: string; missedLimit?: number; overlap?: string };
  paused?: { note?: string; at: number };
}
