import type { Clock } from '../definition/clock';
import { withTimeout, type RedisHealth } from '../store/redis-health';

/**
 * A worker's background tasks on timers of workflow time (a virtual clock that jumps ahead fires
 * them at once): one-off, repeated at an interval, or looped with the delay each run returns.
 * A task that does not settle within `commandTimeoutMs` (a Redis that stopped answering) is
 * given up, so the timers never hang; its error goes to Redis health, or to `onError`.
 */
export class BackgroundTimers {
  private readonly cancels = new Set<() => void>();
  private stoppedForGood = false;

  constructor(
    private readonly clock: Clock,
    private readonly commandTimeoutMs: number,
    private readonly health: RedisHealth,
    private readonly onError: (error: Error) => void,
  ) {}

  /** True once `stop()` ran: no task starts again. */
  get stopped(): boolean {
    return this.stoppedForGood;
  }

  /** Runs `task` once after `delayMs`. */
  once(delayMs: number, task: () => Promise<unknown>): void {
    if (this.stoppedForGood) return;
    const cancel = this.clock.setTimer(delayMs, () => {
      this.cancels.delete(cancel);
      return withTimeout(task(), this.commandTimeoutMs, this.health.address).catch((error: Error) => {
        if (!this.health.report(error)) this.onError(error);
      });
    });
    this.cancels.add(cancel);
  }

  /** Runs `task` again and again, each time after the delay it returned (1 s after a failure). */
  loop(task: () => Promise<number>, delayMs = 0): void {
    this.once(delayMs, async () => {
      let next = 1_000;
      try {
        next = await task();
      } finally {
        if (!this.stoppedForGood) this.loop(task, next);
      }
    });
  }

  /** Runs `task` every `intervalMs`, the next run timed from the end of the last. */
  every(intervalMs: number, task: () => Promise<unknown>): void {
    const tick = () =>
      this.once(intervalMs, async () => {
        try {
          await task();
        } finally {
          if (!this.stoppedForGood) tick();
        }
      });
    tick();
  }

  /** Cancels every timer; no task starts from now on. */
  stop(): void {
    this.stoppedForGood = true;
    for (const cancel of this.cancels) cancel();
    this.cancels.clear();
  }
}
