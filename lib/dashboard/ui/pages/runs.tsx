import { useState } from 'preact/hooks';

import { get, query } from '../api';
import { Empty, RunLink, StatusBadge } from '../components/status';
import { usePage } from '../context';
import { duration, fromInputTime, time, toInputTime } from '../format';
import type { PageDef } from '../router';
import { link, navigate, type Route } from '../router';
import { STATUSES, type RunsPage as Page, type RunRow, type WaitingFor } from '../types';
import { BulkBar } from './runs-bulk';

interface WorkflowChoice {
  name: string;
  queue: string;
}
interface Data {
  page: Page;
  workflows: WorkflowChoice[];
}

/** The filters the URL may hold; anything else in it is ignored. */
const FILTERS = ['workflow', 'version', 'status', 'waiting', 'queue', 'from', 'to', 'q', 'order'] as const;
const WAIT_KINDS = ['sleep', 'signal', 'event', 'child', 'any'] as const;

// The workflow filter's choices change rarely: read once a minute, not on every poll.
let choices: { at: number; workflows: WorkflowChoice[] } | undefined;
async function workflowChoices(): Promise<WorkflowChoice[]> {
  if (!choices || Date.now() - choices.at > 60_000)
    choices = { at: Date.now(), workflows: (await get<{ workflows: WorkflowChoice[] }>('/workflows')).workflows };
  return choices.workflows;
}

function filtersOf(q: URLSearchParams): Record<string, string> {
  const out: Record<string, string> = {};
  for (const key of FILTERS) {
    const value = q.get(key);
    if (value) out[key] = value;
  }
  return out;
}

/** What a scheduled run waits for, in words. */
export function waitingText(w: WaitingFor | undefined): string {
  if (!w) return '';
  const what = w.kind === 'sleep' ? 'a timer' : w.kind === 'any' ? 'the first of several' : w.name ? `${w.kind} "${w.name}"` : w.kind;
  return `waiting for ${what}`;
}

function go(route: Route, changes: Record<string, string | undefined>) {
  const next: Record<string, string | undefined> = { ...filtersOf(route.query), ...changes };
  navigate(link('/runs', next));
}

/** The filter as a phrase, for confirmations: `status failed, workflow checkout`. */
function describe(filters: Record<string, string>): string {
  const parts = Object.entries(filters).filter(([key]) => key !== 'order');
  return parts.length ? parts.map(([k, v]) => `${k} ${v}`).join(', ') : 'no filter (every run)';
}

function Filters({ route, workflows }: { route: Route; workflows: WorkflowChoice[] }) {
  const { zone } = usePage();
  const f = filtersOf(route.query);
  const [kind, name] = (f.waiting ?? '').split(/:(.*)/s);
  const queues = [...new Set(workflows.map((w) => w.queue))].sort();
  const submit = (e: Event) => {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const text = (key: string) => String(form.get(key) ?? '').trim() || undefined;
    const waitKind = text('waitKind');
    const waitName = text('waitName');
    go(route, {
      q: text('q'),
      version: text('version'),
      waiting: waitKind ? (waitName && (waitKind === 'signal' || waitKind === 'event') ? `${waitKind}:${waitName}` : waitKind) : undefined,
      from: fromInputTime(text('from') ?? '', zone)?.toString(),
      to: fromInputTime(text('to') ?? '', zone)?.toString(),
      cursor: undefined,
      trail: undefined,
    });
  };
  const select = (key: string) => (e: Event) =>
    go(route, { [key]: (e.currentTarget as HTMLSelectElement).value || undefined, cursor: undefined, trail: undefined });
  return (
    <form class="filters" onSubmit={submit} aria-label="Filter runs" key={route.query.toString()}>
      <label>
        Search
        <input name="q" type="search" data-testid="search" placeholder="run id, idempotency key or error text" value={f.q ?? ''} />
      </label>
      <label>
        Workflow
        <select data-testid="filter-workflow" value={f.workflow ?? ''} onChange={select('workflow')}>
          <option value="">all workflows</option>
          {workflows.map((w) => (
            <option key={w.name} value={w.name}>
              {w.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Version
        <input name="version" type="number" min={1} inputMode="numeric" data-testid="filter-version" value={f.version ?? ''} disabled={!f.workflow} />
      </label>
      <label>
        Status
        <select data-testid="filter-status" value={f.status ?? ''} onChange={select('status')}>
          <option value="">all statuses</option>
          {STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </label>
      <label>
        Queue
        <select data-testid="filter-queue" value={f.queue ?? ''} onChange={select('queue')}>
          <option value="">all queues</option>
          {queues.map((q) => (
            <option key={q} value={q}>
              {q}
            </option>
          ))}
        </select>
      </label>
      <label>
        Waiting for
        <select name="waitKind" data-testid="filter-waiting" value={kind ?? ''}>
          <option value="">anything or nothing</option>
          {WAIT_KINDS.map((k) => (
            <option key={k} value={k}>
              {k === 'any' ? 'first of several (waitForAny)' : k}
            </option>
          ))}
        </select>
      </label>
      <label>
        Signal or event name
        <input name="waitName" data-testid="filter-waiting-name" value={name ?? ''} />
      </label>
      <label>
        Created from
        <input name="from" type="datetime-local" data-testid="filter-from" value={toInputTime(Number(f.from) || undefined, zone)} />
      </label>
      <label>
        to
        <input name="to" type="datetime-local" data-testid="filter-to" value={toInputTime(Number(f.to) || undefined, zone)} />
      </label>
      <button type="submit" data-testid="filter-apply">
        Apply
      </button>{' '}
      <a href="#/runs" data-testid="filter-clear">
        Clear filters
      </a>
    </form>
  );
}

type Sort = 'created' | 'duration';

function RunsTable({ rows, route, selected, setSelected }: { rows: RunRow[]; route: Route; selected: Set<string>; setSelected: (s: Set<string>) => void }) {
  const { zone, meta } = usePage();
  const [sort, setSort] = useState<{ by: Sort; desc: boolean }>({ by: 'created', desc: route.query.get('order') !== 'oldest' });
  const sorted = sort.by === 'duration' ? [...rows].sort((a, b) => ((a.durationMs ?? -1) - (b.durationMs ?? -1)) * (sort.desc ? -1 : 1)) : rows;
  const toggle = (id: string) => {
    const next = new Set(selected);
    if (next.has(id)) next.delete(id);
    else next.add(id);
    setSelected(next);
  };
  const allOnPage = rows.length > 0 && rows.every((r) => selected.has(r.id));
  const ariaSort = (by: Sort) => (sort.by === by ? (sort.desc ? 'descending' : 'ascending') : 'none');
  return (
    <div class="table-wrap">
      <table data-testid="runs-table">
        <thead>
          <tr>
            {meta.readOnly ? null : (
              <th scope="col">
                <input
                  type="checkbox"
                  aria-label="Select every run on this page"
                  data-testid="select-page"
                  checked={allOnPage}
                  onChange={() =>
                    setSelected(
                      allOnPage ? new Set([...selected].filter((id) => !rows.some((r) => r.id === id))) : new Set([...selected, ...rows.map((r) => r.id)]),
                    )
                  }
                />
              </th>
            )}
            <th scope="col">Run</th>
            <th scope="col">Workflow</th>
            <th scope="col">Status</th>
            <th scope="col">Attempt</th>
            <th scope="col" aria-sort={ariaSort('created')}>
              <button
                type="button"
                class="sort"
                data-testid="sort-created"
                onClick={() => {
                  const oldest = route.query.get('order') !== 'oldest';
                  setSort({ by: 'created', desc: !oldest });
                  go(route, { order: oldest ? 'oldest' : undefined, cursor: undefined, trail: undefined });
                }}
              >
                Created {sort.by === 'created' ? (sort.desc ? '↓' : '↑') : ''}
              </button>
            </th>
            <th scope="col" aria-sort={ariaSort('duration')}>
              <button
                type="button"
                class="sort"
                data-testid="sort-duration"
                title="Sorts the runs of this page"
                onClick={() => setSort({ by: 'duration', desc: sort.by === 'duration' ? !sort.desc : true })}
              >
                Duration {sort.by === 'duration' ? (sort.desc ? '↓' : '↑') : ''}
              </button>
            </th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {sorted.map((r) =>
            r.corrupt !== undefined ? (
              <tr key={r.id} class="corrupt" data-testid="run-row" data-run-id={r.id} data-corrupt="">
                {meta.readOnly ? null : <td />}
                <td>
                  <code>{r.id}</code>
                </td>
                <td>{r.workflow ?? ''}</td>
                <td>corrupt</td>
                <td colSpan={4}>Unreadable in Redis: {r.corrupt}</td>
              </tr>
            ) : (
              <tr key={r.id} data-testid="run-row" data-run-id={r.id} aria-selected={selected.has(r.id) || undefined}>
                {meta.readOnly ? null : (
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`Select run ${r.id}`}
                      data-testid="select-row"
                      checked={selected.has(r.id)}
                      onChange={() => toggle(r.id)}
                    />
                  </td>
                )}
                <td class="id">
                  <RunLink id={r.id} />
                </td>
                <td>
                  {r.workflow}
                  {r.version !== undefined ? <span class="muted"> v{r.version}</span> : null}
                </td>
                <td>
                  <StatusBadge status={r.status} />
                  {r.waitingFor ? (
                    <div class="muted small" data-testid="run-waiting">
                      {waitingText(r.waitingFor)}
                    </div>
                  ) : null}
                </td>
                <td>
                  {r.attempt}/{r.maxAttempts}
                </td>
                <td>{time(r.createdAt, zone)}</td>
                <td>{duration(r.durationMs)}</td>
                <td class="error one-line" title={r.error ? `${r.error.name}: ${r.error.message}` : undefined}>
                  {r.error ? `${r.error.name}: ${r.error.message}` : ''}
                </td>
              </tr>
            ),
          )}
        </tbody>
      </table>
    </div>
  );
}

function Totals({ totals, route }: { totals?: Page['totals']; route: Route }) {
  if (!totals) return null;
  const current = route.query.get('status');
  return (
    <ul class="totals" data-testid="status-totals" aria-label="Runs per status">
      {STATUSES.filter((s) => totals[s]).map((s) => (
        <li key={s}>
          <a
            href={link('/runs', { ...filtersOf(route.query), status: s === current ? undefined : s })}
            aria-current={s === current ? 'true' : undefined}
            data-status={s}
          >
            <StatusBadge status={s} /> {totals[s]}
          </a>
        </li>
      ))}
    </ul>
  );
}

function RunsView({ data, route }: { data: Data; route: Route }) {
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const f = filtersOf(route.query);
  const { page } = data;
  const trail = (route.query.get('trail') ?? '').split('.').filter(Boolean);
  const cursor = route.query.get('cursor') ?? undefined;
  const status = f.status as keyof NonNullable<Page['totals']> | undefined;
  const total = page.totals ? (status ? (page.totals[status] ?? 0) : Object.values(page.totals).reduce((n, c) => n + (c ?? 0), 0)) : undefined;
  const exactTotal = Object.keys(f).every((k) => k === 'workflow' || k === 'status' || k === 'order') ? total : undefined;
  return (
    <>
      <h1>Runs</h1>
      <Filters route={route} workflows={data.workflows} />
      <Totals totals={page.totals} route={route} />
      {page.search ? (
        <p class="muted" data-testid="search-note">
          {page.search.by === 'error'
            ? `Runs whose error contains "${f.q}", among the ${page.search.scanned ?? 'most recent'} most recent failed runs.`
            : page.search.by === 'id'
              ? 'The run with this id.'
              : 'The run started with this idempotency key.'}
        </p>
      ) : null}
      <BulkBar selected={[...selected]} filter={route.query} total={exactTotal} describe={describe(f)} onDone={() => setSelected(new Set())} />
      {page.runs.length ? (
        <RunsTable rows={page.runs} route={route} selected={selected} setSelected={setSelected} />
      ) : (
        <Empty testid="runs-empty">{Object.keys(f).length ? 'No runs match.' : 'No runs yet.'}</Empty>
      )}
      <p class="pager">
        <button
          type="button"
          data-testid="page-prev"
          disabled={!cursor}
          onClick={() => go(route, { cursor: trail[trail.length - 1] || undefined, trail: trail.slice(0, -1).join('.') || undefined })}
        >
          Newer
        </button>{' '}
        <button
          type="button"
          data-testid="page-next"
          disabled={!page.nextCursor}
          onClick={() => go(route, { cursor: page.nextCursor ?? undefined, trail: [...trail, cursor ?? ''].join('.') || undefined })}
        >
          Older
        </button>{' '}
        {selected.size ? <span class="muted">{selected.size} selected</span> : null}
      </p>
    </>
  );
}

export const RunsPage: PageDef<Data> = {
  title: () => 'Runs',
  load: async (route) => {
    const [workflows, page] = await Promise.all([
      workflowChoices(),
      get<Page>(`/runs?${query({ ...filtersOf(route.query), cursor: route.query.get('cursor'), limit: 25 })}`),
    ]);
    return { workflows, page };
  },
  View: RunsView,
};
