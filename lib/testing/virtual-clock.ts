import { toMs, type Clock, type Duration } from '../core';

interface PendingTimer {
  dueAt: number;
  fn: () => unknown;
  handle: NodeJS.Timeout;
}

/**
 * A clock for tests: real time plus an offset that `advance()` raises. Give it to a client
 * (`createClient({ clock })`) and its workers use it too; `createTestEngine()` and
 * `RedflowTestingModule` do that for you. Due times (waits, retry delays, `runAt`, schedules,
 * cron ticks, wait timeouts) follow it; leases keep real time, so jumping ahead never makes the
 * reaper take a run from a live worker.
 */
export class VirtualClock implements Clock {
  private offset = 0;
  private readonly pending = new Set<PendingTimer>();

  /** Real time plus every `advance()` so far, in epoch ms. */
  now(): number {
    return Date.now() + this.offset;
  }

  /** How far this clock is ahead of real time, in ms. */
  get offsetMs(): number {
    return this.offset;
  }

  setTimer(ms: number, fn: () => unknown): () => void {
    const timer: PendingTimer = {
      dueAt: this.now() + ms,
      fn,
      handle: setTimeout(() => this.fire(timer), ms),
    };
    this.pending.add(timer);
    return () => {
      clearTimeout(timer.handle);
      this.pending.delete(timer);
    };
  }

  /**
   * Moves the clock ahead by `duration` (ms or a duration string such as `'1h'`) and fires at once
   * every timer that is now due: the workers then promote due runs, fire due events and cron ticks.
   * Resolves once the woken tasks have run (a run they made due may still be executing: await its
   * state, e.g. with `runUntilWaiting` or `handle.result()`).
   */
  async advance(duration: Duration): Promise<void> {
    this.offset += toMs(duration, 'VirtualClock.advance duration');
    const now = this.now();
    const due = [...this.pending].filter((t) => t.dueAt <= now);
    await Promise.allSettled(due.map((t) => this.fire(t)));
  }

  private async fire(timer: PendingTimer): Promise<void> {
    if (!this.pending.delete(timer)) return;
    clearTimeout(timer.handle);
    await timer.fn();
  }
}
