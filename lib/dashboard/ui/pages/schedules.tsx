import { useState } from 'preact/hooks';

import { act, get, query } from '../api';
import { Empty, RunLink, StatusBadge } from '../components/status';
import { usePage } from '../context';
import { time } from '../format';
import type { PageDef } from '../router';
import { navigate, runHref } from '../router';
import type { ScheduleRow } from '../types';
import { schedule } from './workflows';

function RunNow({ id, workflow }: { id: string; workflow: string }) {
  const { meta } = usePage();
  const [message, setMessage] = useState('');
  if (meta.readOnly) return null;
  const run = async () => {
    if (!window.confirm(`Start schedule "${id}" (${workflow}) now?`)) return;
    try {
      const { runId } = await act<{ runId: string }>(`/schedules/trigger?${query({ id })}`);
      navigate(runHref(runId));
    } catch (error) {
      setMessage(error instanceof Error ? error.message : String(error));
    }
  };
  return (
    <>
      <button type="button" data-testid="schedule-trigger" onClick={() => void run()}>
        Run now
      </button>{' '}
      <span class="error" role="alert">
        {message}
      </span>
    </>
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
                  <td>
                    <RunNow id={s.id} workflow={s.workflow} />
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
