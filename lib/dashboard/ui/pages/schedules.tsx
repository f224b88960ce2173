import { act, get, query } from '../api';
import { useAction } from '../components/action';
import { Empty, RunLink, StatusBadge } from '../components/status';
import { usePage } from '../context';
import { time } from '../format';
import type { PageDef } from '../router';
import { navigate, runHref } from '../router';
import type { ScheduleRow } from '../types';
import { schedule } from './workflows';

/** Run now (a tick under the overlap policy), and pause or resume: hidden in read-only mode. */
function ScheduleActions({ row }: { row: ScheduleRow }) {
  const { meta, reload } = usePage();
  const { message, attempt } = useAction();
  if (meta.readOnly) return null;
  const { id, workflow } = row;
  const source = row.source ?? '';
  const run = () =>
    attempt(async () => {
      if (!window.confirm(`Start schedule "${id}" (${workflow}) now?`)) return;
      const { runId } = await act<{ runId: string }>(`/schedules/trigger?${query({ id, source })}`);
      navigate(runHref(runId));
    });
  const pause = () =>
    attempt(async () => {
      const note = window.prompt(`Pause schedule "${id}"? No tick fires until it is resumed. A note for the next operator (optional):`, '');
      if (note === null) return;
      await act(`/schedules/pause?${query({ id, source, note })}`);
      reload();
    });
  const resume = () =>
    attempt(async () => {
      if (!window.confirm(`Resume schedule "${id}"? It goes on with its first tick after now.`)) return;
      await act(`/schedules/resume?${query({ id, source })}`);
      reload();
    });
  return (
    <>
      <button type="button" data-testid="schedule-trigger" onClick={() => void run()}>
        Run now
      </button>{' '}
      {row.paused ? (
        <button type="button" data-testid="schedule-resume" onClick={() => void resume()}>
          Resume
        </button>
      ) : (
        <button type="button" data-testid="schedule-pause" onClick={() => void pause()}>
          Pause
        </button>
      )}{' '}
      <span class="error" role="alert">
        {message}
      </span>
    </>
  );
}

/** Active, paused (with its note) or ended, and the policies given. */
function ScheduleState({ row }: { row: ScheduleRow }) {
  const policies = Object.entries(row.policies ?? {}).map(([k, v]) => `${k}: ${String(v)}`);
  return (
    <td data-testid="schedule-state">
      {row.paused ? <strong>paused{row.paused.note ? ` · ${row.paused.note}` : ''}</strong> : row.nextAt === undefined ? 'ended' : 'active'}
      {policies.length ? <div class="muted small">{policies.join(', ')}</div> : null}
    </td>
  );
}

function SchedulesView({ data }: { data: { schedules: ScheduleRow[] } }) {
  const { zone } = usePage();
  return (
    <>
      <h1>Schedules</h1>
      <p class="muted">Times are shown {zone === 'utc' ? 'in UTC' : "in this browser's time zone"}; the schedule's own time zone decides when it fires.</p>
      {data.schedules.length ? (
        <div class="table-wrap">
          <table data-testid="schedules-table">
            <thead>
              <tr>
                <th scope="col">Schedule</th>
                <th scope="col">Workflow</th>
                <th scope="col">When</th>
                <th scope="col">Next fire times</th>
                <th scope="col">Last runs</th>
                <th scope="col">State</th>
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {data.schedules.map((s) => (
                <tr key={s.id} data-testid="schedule-row" data-schedule={s.id}>
                  <td>
                    <code>{s.id}</code>
                    {s.source ? <div class="muted small">{s.source}</div> : null}
                  </td>
                  <td>{s.workflow}</td>
                  <td>
                    {schedule(s)}
                    {s.timezone ? <div class="muted small">{s.timezone}</div> : null}
                  </td>
                  <td>
                    <ul class="plain" data-testid="schedule-next">
                      {(s.next ?? (s.nextAt ? [s.nextAt] : [])).map((t) => (
                        <li key={t}>{time(t, zone)}</li>
                      ))}
                    </ul>
                  </td>
                  <td>
                    <ul class="plain">
                      {(s.lastRuns ?? []).map((r) => (
                        <li key={r.id}>
                          <StatusBadge status={r.status} /> <RunLink id={r.id} />
                        </li>
                      ))}
                    </ul>
                  </td>
                  <ScheduleState row={s} />
                  <td>
                    <ScheduleActions row={s} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <Empty testid="schedules-empty">No schedule: add a cron to a workflow, or call client.schedule().</Empty>
      )}
    </>
  );
}

export const SchedulesPage: PageDef<{ schedules: ScheduleRow[] }> = {
  title: () => 'Schedules',
  load: () => get('/schedules'),
  View: SchedulesView,
};
