import { useCallback, useEffect, useMemo, useRef, useState } from 'preact/hooks';

import { get } from './api';
import { Ctx, type PageContext } from './context';
import type { TimeZoneMode } from './format';
import { OverviewPage } from './pages/overview';
import { QueuesPage } from './pages/queues';
import { RunPage } from './pages/run';
import { RunsPage } from './pages/runs';
import { SchedulesPage } from './pages/schedules';
import { VersionsPage } from './pages/versions';
import { WorkersPage } from './pages/workers';
import { WorkflowsPage } from './pages/workflows';
import { usePoll } from './poller';
import { currentRoute, type PageDef, type Route } from './router';
import type { Meta } from './types';

/** A page of any data, in the table of pages. */
const any = <D,>(page: PageDef<D>) => page as unknown as PageDef<unknown>;

const PAGES: Array<{ match: (path: string) => boolean; nav?: { path: string; label: string; testid: string }; page: PageDef<unknown> }> = [
  { match: (p) => p === '/', nav: { path: '/', label: 'Overview', testid: 'nav-overview' }, page: any(OverviewPage) },
  { match: (p) => p === '/runs', nav: { path: '/runs', label: 'Runs', testid: 'nav-runs' }, page: any(RunsPage) },
  { match: (p) => p.startsWith('/runs/'), page: any(RunPage) },
  { match: (p) => p === '/queues', nav: { path: '/queues', label: 'Queues', testid: 'nav-queues' }, page: any(QueuesPage) },
  { match: (p) => p === '/workers', nav: { path: '/workers', label: 'Workers', testid: 'nav-workers' }, page: any(WorkersPage) },
  { match: (p) => p === '/versions', nav: { path: '/versions', label: 'Versions', testid: 'nav-versions' }, page: any(VersionsPage) },
  { match: (p) => p === '/schedules', nav: { path: '/schedules', label: 'Schedules', testid: 'nav-schedules' }, page: any(SchedulesPage) },
  { match: (p) => p === '/workflows', nav: { path: '/workflows', label: 'Workflows', testid: 'nav-workflows' }, page: any(WorkflowsPage) },
];

const NOT_FOUND: PageDef<null> = {
  title: () => 'Not found',
  load: () => Promise.resolve(null),
  live: () => false,
  View: () => <p data-testid="page-error">Nothing here.</p>,
};

const stored = (key: string): string | null => {
  try {
    return localStorage.getItem(`redflow:${key}`);
  } catch {
    return null;
  }
};
const store = (key: string, value: string) => {
  try {
    localStorage.setItem(`redflow:${key}`, value);
  } catch {
    // private mode: the choice lasts this page only
  }
};

function useRoute(): Route {
  const [route, setRoute] = useState(currentRoute);
  useEffect(() => {
    const onHash = () => setRoute(currentRoute());
    window.addEventListener('hashchange', onHash);
    return () => window.removeEventListener('hashchange', onHash);
  }, []);
  return route;
}

export function App() {
  const route = useRoute();
  const [meta, setMeta] = useState<Meta>();
  const [metaError, setMetaError] = useState<string>();
  const [zone, setZone] = useState<TimeZoneMode>(() => (stored('zone') === 'utc' ? 'utc' : 'local'));
  const [paused, setPaused] = useState(() => stored('paused') === '1');
  const [said, setSaid] = useState('');
  const main = useRef<HTMLElement>(null);

  useEffect(() => {
    get<Meta>('/meta').then(setMeta, (error: Error) => setMetaError(error.message));
  }, []);

  const entry = PAGES.find((p) => p.match(route.path));
  const page = entry?.page ?? any(NOT_FOUND);
  const key = `${route.path}?${route.query.toString()}`;
  const load = useCallback(() => page.load(route), [key]);
  const [loaded, reload] = usePoll(meta ? key : '', meta ? load : () => new Promise<never>(() => undefined), (data) => page.live?.(data) ?? true, paused);

  useEffect(() => {
    document.title = `${page.title(route)} · Redflow`;
  }, [key]);

  const context: PageContext = useMemo(
    () => ({ meta: meta ?? { readOnly: true, prefix: '' }, zone, paused, reload, announce: setSaid, now: loaded.at || Date.now() }),
    [meta, zone, paused, reload, loaded.at],
  );

  const current = loaded.key === key ? loaded : undefined;
  return (
    <Ctx.Provider value={context}>
      <a class="skip" href="#main" onClick={(e) => (e.preventDefault(), main.current?.focus())}>
        Skip to content
      </a>
      <header>
        <strong class="brand">Redflow</strong>
        <nav aria-label="Sections">
          {PAGES.filter((p) => p.nav).map(({ nav, match }) => (
            <a key={nav!.path} href={`#${nav!.path}`} data-testid={nav!.testid} aria-current={match(route.path) ? 'page' : undefined}>
              {nav!.label}
            </a>
          ))}
        </nav>
        <span class="muted" id="meta">
          {meta ? `prefix ${meta.prefix}${meta.readOnly ? ' · read-only' : ''}` : ''}
        </span>
        <span class="toggles">
          <button
            type="button"
            data-testid="toggle-zone"
            aria-pressed={zone === 'utc'}
            title="Show times in UTC or in this browser's time zone"
            onClick={() => {
              const next = zone === 'utc' ? 'local' : 'utc';
              setZone(next);
              store('zone', next);
            }}
          >
            {zone === 'utc' ? 'Times: UTC' : 'Times: local'}
          </button>
          <button
            type="button"
            data-testid="toggle-live"
            aria-pressed={paused}
            title="Pause or resume live updates"
            onClick={() => {
              setPaused(!paused);
              store('paused', paused ? '0' : '1');
            }}
          >
            {paused ? 'Live updates: paused' : 'Live updates: on'}
          </button>
        </span>
      </header>
      <p class="notice" data-testid="notice" hidden={!current?.notice}>
        {current?.notice ?? ''}
      </p>
      <div class="sr-only" role="status" aria-live="polite" data-testid="announcer">
        {said}
      </div>
      <main id="main" ref={main} tabIndex={-1}>
        {current?.data !== undefined && !metaError && !current.error ? (
          <page.View data={current.data} route={route} />
        ) : (
          <>
            <h1>{page.title(route)}</h1>
            {metaError || current?.error ? (
              <p class="error" data-testid="page-error">
                {metaError ?? current!.error!.message}
              </p>
            ) : (
              <p class="muted" aria-busy="true">
                Loading…
              </p>
            )}
          </>
        )}
      </main>
    </Ctx.Provider>
  );
}
