import { useEffect, useRef, useState } from 'preact/hooks';

import { ApiError } from './api';

/** How often a live page reads again. */
export const POLL_MS = 1500;
const MAX_BACKOFF_MS = 30_000;

export interface Loaded<D> {
  /** The route key the data belongs to. */
  key: string;
  data?: D;
  /** A refusal to show instead of the page (404, 400, ...). */
  error?: ApiError;
  /** A sentence to show above the page while reads fail (Redis unreachable, server down). */
  notice?: string;
  at: number;
}

/**
 * Reads a page's data, then again every POLL_MS while `live(data)` holds, the tab is visible and
 * updates are not paused; slower after each failure, keeping what is on screen. A reply for a route
 * the user has left is dropped. `body[data-polling]` says which: on, off, paused or backoff.
 */
export function usePoll<D>(key: string, load: () => Promise<D>, live: (data: D) => boolean, paused: boolean): [Loaded<D>, () => void] {
  const [state, setState] = useState<Loaded<D>>({ key, at: 0 });
  const generation = useRef(0);
  const failures = useRef(0);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const [kick, setKick] = useState(0);

  useEffect(() => {
    const mine = ++generation.current;
    let stopped = false;
    const setPolling = (value: string) => (document.body.dataset.polling = value);
    const schedule = (delay: number | undefined) => {
      clearTimeout(timer.current);
      if (delay !== undefined && !document.hidden && !stopped) timer.current = setTimeout(read, delay);
    };
    // What is on screen stays, with the notice; data of another route is never shown under this one.
    const keep = (s: Loaded<D>, notice: string): Loaded<D> => (s.key === key ? { ...s, notice } : { key, notice, at: s.at });
    async function read() {
      clearTimeout(timer.current);
      try {
        const data = await load();
        if (mine !== generation.current) return;
        failures.current = 0;
        setState({ key, data, at: Date.now() });
        const more = live(data);
        setPolling(!more ? 'off' : paused ? 'paused' : 'on');
        schedule(more && !paused ? POLL_MS : undefined);
      } catch (thrown) {
        if (mine !== generation.current) return;
        const error = thrown instanceof ApiError ? thrown : new ApiError(String(thrown), undefined, undefined);
        failures.current++;
        const delay = Math.min(MAX_BACKOFF_MS, POLL_MS * 2 ** failures.current);
        const retry = `Retrying in ${Math.round(delay / 1000)} s.`;
        if (error.code === 'REDIS_UNAVAILABLE' || error.code === 'REDIS_WRITE_REFUSED') {
          setState((s) => keep(s, `${error.message} ${retry}`));
        } else if (error.status === undefined || error.status >= 500) {
          setState((s) => keep(s, `The server did not answer (${error.message}). ${retry}`));
        } else {
          setState({ key, error, at: Date.now() });
        }
        setPolling('backoff');
        schedule(delay);
      }
    }
    const onVisibility = () => {
      if (document.hidden) clearTimeout(timer.current);
      else if (document.body.dataset.polling !== 'off' && !paused) void read();
    };
    document.addEventListener('visibilitychange', onVisibility);
    void read();
    return () => {
      stopped = true;
      clearTimeout(timer.current);
      document.removeEventListener('visibilitychange', onVisibility);
    };
    // `load` and `live` belong to the route: `key` stands for them.
  }, [key, paused, kick]);

  return [state, () => setKick((k) => k + 1)];
}
