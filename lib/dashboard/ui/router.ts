import type { FunctionComponent } from 'preact';

// The page's address is its state: `#/runs?workflow=checkout&status=failed` can be shared.

export interface Route {
  /** `/`, `/runs`, `/runs/<id>`, `/queues`, ... */
  path: string;
  query: URLSearchParams;
}

export function currentRoute(): Route {
  const [path, search] = location.hash.replace(/^#/, '').split('?');
  return { path: path || '/', query: new URLSearchParams(search || '') };
}

/** The hash of `path` with `params` (empty values left out). */
export function link(path: string, params: Record<string, string | number | undefined | null> = {}): string {
  const q = new URLSearchParams();
  for (const [key, value] of Object.entries(params)) if (value !== undefined && value !== null && value !== '') q.set(key, String(value));
  const search = q.toString();
  return `#${path}${search ? `?${search}` : ''}`;
}

export const runHref = (id: string): string => `#/runs/${encodeURIComponent(id)}`;

export function navigate(hash: string): void {
  if (location.hash !== hash) location.hash = hash;
}

/** A page: what it reads, whether it keeps reading, and how it draws what it read. */
export interface PageDef<D> {
  title: (route: Route) => string;
  load: (route: Route) => Promise<D>;
  /** Whether the page reads again (an ended run's page does not). */
  live?: (data: D) => boolean;
  View: FunctionComponent<{ data: D; route: Route }>;
}
