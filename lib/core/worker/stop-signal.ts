/** What `untilStopped` resolves with once the worker is stopping. */
export const STOPPED = Symbol('stopped');

/**
 * Resolves when a worker's stop() begins: the waits of its queue loops and background work end
 * then, even those on a dead connection that would never answer.
 */
export class StopSignal {
  readonly promise: Promise<void>;
  private resolve!: () => void;
  private requested = false;

  constructor() {
    this.promise = new Promise<void>((resolve) => (this.resolve = resolve));
  }

  /** True once stop() was called. */
  get stopping(): boolean {
    return this.requested;
  }

  request(): void {
    this.requested = true;
    this.resolve();
  }

  /** `promise`, or STOPPED as soon as stop() is called (the promise then settles unobserved). */
  untilStopped<T>(promise: Promise<T>): Promise<T | typeof STOPPED> {
    promise.catch(() => undefined);
    return Promise.race([promise, this.promise.then((): typeof STOPPED => STOPPED)]);
  }

  /** Waits `ms`, or less when stop() is called meanwhile. */
  async pause(ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))), this.promise]);
    clearTimeout(timer);
  }
}
