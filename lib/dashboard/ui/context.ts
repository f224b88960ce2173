import { createContext } from 'preact';
import { useContext } from 'preact/hooks';

import type { TimeZoneMode } from './format';
import type { Meta } from './types';

/** What every page may read: the server's meta, the time zone, whether live updates are paused, and a way to reload now. */
export interface PageContext {
  meta: Meta;
  zone: TimeZoneMode;
  paused: boolean;
  /** Reads the current page again now (after an action). */
  reload: () => void;
  /** Says something to screen readers (the run page's status changes). */
  announce: (text: string) => void;
  /** The time of the last read, for "ago" columns. */
  now: number;
}

export const Ctx = createContext<PageContext>({
  meta: { readOnly: true, prefix: '' },
  zone: 'local',
  paused: false,
  reload: () => undefined,
  announce: () => undefined,
  now: 0,
});

export const usePage = (): PageContext => useContext(Ctx);
