import { get } from '../api';
import { Empty } from '../components/status';
import { usePage } from '../context';
import { ago, time } from '../format';
import type { PageDef } from '../router';
import type { WorkerRow } from '../types';

const versionsText = (v: WorkerRow['versions']) => (v ?? []).map(({ workflow, version }) => `${workflow} v${version}`).join(', ');

function WorkersView({ data }: { data: { workers: WorkerRow[] } }) {
  const { now, zone } = usePage();
  return (
    <>
      <h1>Workers</h1>
      {data.workers.length ? (
        <div class="table-wrap">
          <table data-testid="workers-table">
            <thead>
              <tr>
                <th scope="col">Worker</th>
                <th scope="col">Host</th>
                <th scope="col">PID</th>
                <th scope="col">Queues</th>
                <th scope="col">Versions served</th>
                <th scope="col">Concurrency</th>
                <th scope="col">Active runs</th>
                <th scope="col">Last heartbeat</th>
              </tr>
            </thead>
            <tbody>
              {data.workers.map((w) => (
                <tr key={w.workerId} data-testid="worker-row">
                  <td>
                    <code>{w.workerId}</code>
                  </td>
                  <td>{w.host}</td>
                  <td>{w.pid}</td>
                  <td>{(w.queues ?? []).join(', ')}</td>
                  <td>{versionsText(w.versions)}</td>
                  <td>{w.concurrency}</td>
                  <td>{w.active}</td>
                  <td title={time(w.heartbeatAt, zone)}>{ago(w.heartbeatAt, now)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <Empty testid="workers-empty">No worker has been seen in the last minute.</Empty>
      )}
    </>
  );
}

export const WorkersPage: PageDef<{ workers: WorkerRow[] }> = {
  title: () => 'Workers',
  load: () => get('/workers'),
  View: WorkersView,
};
