/**
 * The engine's one source of workflow time. Due times (a `waitFor`, a retry delay, `runAt`, a
 * cron tick, a wait's timeout) are measured with `now()` and waited for with `setTimer`, so a test
 * clock (`VirtualClock` of `nestjs-redflow/testing`) can move them forward without real waiting.
 * Leases are not workflow time: they detect dead processes and always use real time (`Date.now()`),
 * so moving a clock forward never makes a live worker's run look abandoned.
 */
export interface Clock {
  /** The current workflow time in epoch ms. */
  now(): number;
  /**
   * Calls `fn` once `ms` of this clock's time have passed (earlier when the clock jumps ahead).
   * Returns a function that cancels the timer.
   */
  setTimer(ms: number, fn: () => unknown): () => void;
}

/** The real clock: `Date.now()` and `setTimeout`. The default of every client and worker. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer(ms, fn) {
    const timer = setTimeout(fn, ms);
    return () => clearTimeout(timer);
  },
};

/** Waits `ms` of the clock's time; resolves early when `signal` aborts. */
export function clockSleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const onAbort = () => {
      cancel();
      resolve();
    };
    const cancel = clock.setTimer(ms, () => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
