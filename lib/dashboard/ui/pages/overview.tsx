import { get } from '../api';
import { StatusBadge } from '../components/status';
import { usePage } from '../context';
import { clock } from '../format';
import type { PageDef } from '../router';
import { link } from '../router';
import { STATUSES, type Status } from '../types';

interface Stats {
  byStatus: Record<Status, number>;
  byWorkflow: Record<string, number>;
  perMinute: Array<{ minute: number; succeeded: number; failed: number }>;
}

function Chart({ perMinute }: { perMinute: Stats['perMinute'] }) {
  const { zone } = usePage();
  const max = Math.max(1, ...perMinute.map((m) => m.succeeded + m.failed));
  const width = 600;
  const height = 100;
  const step = width / Math.max(1, perMinute.length);
  const total = perMinute.reduce((n, m) => n + m.succeeded + m.failed, 0);
  return (
    <svg class="chart" viewBox={`0 0 ${width} ${height}`} preserveAspectRatio="none" role="img" aria-label={`${total} runs ended in the last hour`}>
      {perMinute.map((m, i) => {
        const ok = (m.succeeded / max) * height;
        const bad = (m.failed / max) * height;
        const label = `${clock(m.minute, zone).slice(0, 5)}: ${m.succeeded} succeeded, ${m.failed} failed`;
        return (
          <g key={m.minute}>
            {m.succeeded ? (
              <rect class="ok" x={i * step + 1} y={height - ok} width={Math.max(1, step - 2)} height={ok}>
                <title>{label}</title>
              </rect>
            ) : null}
            {m.failed ? (
              <rect class="bad" x={i * step + 1} y={height - ok - bad} width={Math.max(1, step - 2)} height={bad}>
                <title>{label}</title>
              </rect>
            ) : null}
          </g>
        );
      })}
    </svg>
  );
}

export const OverviewPage: PageDef<Stats> = {
  title: () => 'Overview',
  load: () => get<Stats>('/overview'),
  View: ({ data }) => (
    <>
      <h1>Overview</h1>
      <div class="cards" data-testid="status-counts">
        {STATUSES.map((s) => (
          <a key={s} class="card" href={link('/runs', { status: s })}>
            <b>{data.byStatus[s] ?? 0}</b> <StatusBadge status={s} />
          </a>
        ))}
      </div>
      <h2>Ended runs per minute, last hour</h2>
      <p class="muted">Green: succeeded. Red: failed.</p>
      <Chart perMinute={data.perMinute} />
      <h2>Runs per workflow</h2>
      {Object.keys(data.byWorkflow).length ? (
        <table>
          <thead>
            <tr>
              <th scope="col">Workflow</th>
              <th scope="col">Runs</th>
            </tr>
          </thead>
          <tbody>
            {Object.entries(data.byWorkflow).map(([name, count]) => (
              <tr key={name}>
                <td>
                  <a href={link('/runs', { workflow: name })}>{name}</a>
                </td>
                <td>{count}</td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : (
        <p class="muted">No runs yet.</p>
      )}
    </>
  ),
};
