import type { RedflowLogger } from '../definition/logger';

/**
 * Watches a worker's event loop: warns when it was blocked for more than half the lease (runs of
 * the worker may then lose their lease to another worker while a step still runs here), and tells
 * why when an attempt finds its run taken over after such a block.
 */
export class EventLoopWatchdog {
  /** The last time the event loop was blocked for more than half the lease. */
  private lastBlock: { endedAt: number; ms: number } | undefined;
  private lastWarningAt = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly workerId: string,
    private readonly leaseMs: number,
    private readonly logger: RedflowLogger,
  ) {}

  start(): void {
    const interval = Math.max(20, Math.min(500, Math.floor(this.leaseMs / 4)));
    let last = Date.now();
    this.timer = setInterval(() => {
      const now = Date.now();
      const blockedMs = now - last;
      last = now;
      if (blockedMs - interval <= this.leaseMs / 2) return;
      this.lastBlock = { endedAt: now, ms: blockedMs };
      if (now - this.lastWarningAt < 30_000) return;
      this.lastWarningAt = now;
      this.logger.warn(
        `The event loop of worker "${this.workerId}" was blocked for ${blockedMs} ms, more than half of leaseMs (${this.leaseMs} ms): its runs may lose their lease and be resumed by another worker. Move CPU-heavy work off the event loop (worker_threads) or raise leaseMs.`,
      );
    }, interval);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * An attempt found it no longer holds its run. If the event loop was blocked meanwhile, that
   * is why: say so, with the fix.
   */
  leaseLost(runId: string, attemptStartedAt: number): void {
    const block = this.lastBlock;
    if (!block || block.endedAt < attemptStartedAt) return;
    this.logger.warn(
      `Run "${runId}" was taken over by another worker: the event loop of worker "${this.workerId}" was blocked for ${block.ms} ms while it ran, and its lease (leaseMs ${this.leaseMs} ms) expired. This attempt stopped without storing anything more; the run goes on from its last stored step. Raise leaseMs, or move CPU-heavy work off the event loop (worker_threads).`,
    );
  }
}
