import { useState } from 'preact/hooks';

import { act, get, query } from '../api';
import { usePage } from '../context';

export const BULK_ACTIONS = ['resume', 'rerun', 'cancel', 'terminate', 'delete'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];
const BATCH = 100;
const IDS_PAGE = 500;

interface Progress {
  action: BulkAction;
  total: number;
  processed: number;
  done: number;
  skipped: Array<{ id: string; reason: string }>;
  phase: 'reading' | 'acting' | 'finished' | 'failed';
  message?: string;
}

/** Every id a filter selects now, read page by page before anything changes. */
async function idsOf(filter: URLSearchParams, onPage: (count: number) => void): Promise<string[]> {
  const ids: string[] = [];
  let cursor: string | null | undefined;
  const params = Object.fromEntries([...filter].filter(([key]) => key !== 'cursor' && key !== 'trail'));
  do {
    const page = await get<{ ids: string[]; nextCursor: string | null }>(`/runs/ids?${query({ ...params, limit: IDS_PAGE, cursor })}`);
    ids.push(...page.ids);
    onPage(ids.length);
    cursor = page.nextCursor;
  } while (cursor);
  return ids;
}

/**
 * Bulk actions: on the selected rows, or on every run the filter selects. The ids are read first
 * (the selection does not move while it acts), the count confirmed, then posted in batches of 100
 * with a progress bar.
 */
export function BulkBar({
  selected,
  filter,
  total,
  describe,
  onDone,
}: {
  selected: string[];
  filter: URLSearchParams;
  total?: number;
  describe: string;
  onDone: () => void;
}) {
  const { meta, reload } = usePage();
  const [action, setAction] = useState<BulkAction>('resume');
  const [progress, setProgress] = useState<Progress>();
  if (meta.readOnly) return null;
  const busy = progress?.phase === 'reading' || progress?.phase === 'acting';

  async function run(ids: string[] | undefined) {
    let state: Progress = { action, total: ids?.length ?? total ?? 0, processed: 0, done: 0, skipped: [], phase: ids ? 'acting' : 'reading' };
    setProgress(state);
    try {
      let list = ids;
      if (!list) {
        list = await idsOf(filter, (count) => setProgress({ ...state, total: count }));
        state = { ...state, total: list.length, phase: 'acting' };
        if (!window.confirm(`${action} ${list.length} run${list.length === 1 ? '' : 's'} matching ${describe}?`)) {
          setProgress(undefined);
          return;
        }
        setProgress(state);
      }
      for (let i = 0; i < list.length; i += BATCH) {
        const batch = list.slice(i, i + BATCH);
        const result = await act<{ done: string[]; skipped: Array<{ id: string; reason: string }> }>(`/runs/bulk?${query({ action, ids: batch.join(',') })}`);
        state = { ...state, processed: state.processed + batch.length, done: state.done + result.done.length, skipped: [...state.skipped, ...result.skipped] };
        setProgress(state);
      }
      setProgress({ ...state, phase: 'finished' });
    } catch (error) {
      setProgress({ ...state, phase: 'failed', message: error instanceof Error ? error.message : String(error) });
    }
    onDone();
    reload();
  }

  return (
    <div class="bulk" data-testid="bulk">
      <label>
        Action{' '}
        <select
          data-testid="bulk-action"
          value={action}
          disabled={busy}
          onChange={(e) => setAction((e.currentTarget as HTMLSelectElement).value as BulkAction)}
        >
          {BULK_ACTIONS.map((a) => (
            <option key={a} value={a}>
              {a}
            </option>
          ))}
        </select>
      </label>{' '}
      <button
        type="button"
        data-testid="bulk-selected"
        disabled={busy || !selected.length}
        onClick={() => window.confirm(`${action} the ${selected.length} selected run${selected.length === 1 ? '' : 's'}?`) && void run(selected)}
      >
        Apply to {selected.length} selected
      </button>{' '}
      <button type="button" data-testid="bulk-filter" disabled={busy || total === 0} onClick={() => void run(undefined)}>
        Apply to all runs of this view{total !== undefined ? ` (${total})` : ''}
      </button>
      {progress ? (
        <div class="bulk-progress" data-testid="bulk-progress" data-phase={progress.phase}>
          <progress
            max={Math.max(1, progress.total)}
            value={progress.processed}
            aria-label={`${progress.action}: ${progress.processed} of ${progress.total}`}
          />{' '}
          <span data-testid="bulk-result">
            {progress.phase === 'reading'
              ? `Reading the runs that match… ${progress.total}`
              : `${progress.action}: ${progress.processed} of ${progress.total} processed, ${progress.done} done, ${progress.skipped.length} skipped`}
            {progress.phase === 'finished' ? '. Finished.' : ''}
            {progress.message ? ` Stopped: ${progress.message}` : ''}
          </span>
          {progress.skipped.length ? (
            <details>
              <summary>Skipped runs</summary>
              <ul>
                {progress.skipped.slice(0, 100).map((s) => (
                  <li key={s.id}>
                    <code>{s.id}</code>: {s.reason}
                  </li>
                ))}
              </ul>
            </details>
          ) : null}
        </div>
      ) : null}
    </div>
  );
}
