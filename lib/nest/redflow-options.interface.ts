import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { WorkerRuntimeOptions } from '../core';
import type { DashboardOptions } from '../dashboard/dashboard-handler';

/** Worker settings of `RedflowModule`. */
export interface RedflowWorkerOptions {
  /** @default true */
  enabled?: boolean;
  /** @default the queues of the discovered workflows */
  queues?: string[];
  /** Runs executed at once by this app. @default 10 */
  concurrency?: number;
  runtime?: WorkerRuntimeOptions;
  /** @default process.env.REDFLOW_RUN_RETENTION_DAYS ?? 30 */
  retentionDays?: number;
}

/** Options of `RedflowModule.forRoot` / `forRootAsync`. */
export interface RedflowModuleOptions {
  /** A stable id of this app: the owner of its workflows in the Redis registry. */
  app: string;
  /**
   * A redis:// URL, ioredis options, or an ioredis `Redis` / `Cluster` you own (it is not closed
   * on shutdown). @default process.env.REDIS_URL
   */
  connection?: string | RedisOptions | Redis | Cluster;
  /** @default process.env.REDFLOW_PREFIX ?? "redflow" */
  prefix?: string;
  /** `false` for a producer-only app that never claims runs. @default { enabled: true } */
  worker?: RedflowWorkerOptions | false;
  /** Defaults for workflows that do not set them. */
  defaults?: {
    /** @default 1 */
    maxConcurrency?: number;
  };
  /** How long shutdown waits for running workflows to finish. @default 10000 */
  shutdownTimeoutMs?: number;
  /** Largest input or step output in bytes. @default 1048576 */
  maxPayloadBytes?: number;
  /**
   * Mounts the web dashboard on this app's HTTP server (Express): `{ path, authorize, readOnly }`.
   * `authorize(request)` is required; pass `() => true` for open access.
   */
  dashboard?: DashboardOptions;
}

/** The options with every default applied. The only place defaults are merged. */
export interface ResolvedRedflowOptions extends RedflowModuleOptions {
  worker: Required<Pick<RedflowWorkerOptions, 'enabled' | 'concurrency'>> & RedflowWorkerOptions;
  shutdownTimeoutMs: number;
}

export function resolveRedflowOptions(options: RedflowModuleOptions): ResolvedRedflowOptions {
  const worker = options.worker === false ? { enabled: false } : (options.worker ?? {});
  return {
    ...options,
    worker: { ...worker, enabled: worker.enabled ?? true, concurrency: worker.concurrency ?? 10 },
    shutdownTimeoutMs: options.shutdownTimeoutMs ?? 10_000,
  };
}
