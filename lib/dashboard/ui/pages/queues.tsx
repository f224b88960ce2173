import { get } from '../api';
import { Empty } from '../components/status';
import { usePage } from '../context';
import { ago } from '../format';
import type { PageDef } from '../router';
import { link } from '../router';
import type { QueueRow } from '../types';

function QueuesView({ data }: { data: { queues: QueueRow[] } }) {
  const { now } = usePage();
  return (
    <>
      <h1>Queues</h1>
      {data.queues.length ? (
        <div class="table-wrap">
          <table data-testid="queues-table">
            <thead>
              <tr>
                <th scope="col">Queue</th>
                <th scope="col">Queued</th>
                <th scope="col">Scheduled</th>
                <th scope="col">Running</th>
                <th scope="col">Oldest queued</th>
                <th scope="col">Ended, last 5 min</th>
                <th scope="col">State</th>
              </tr>
            </thead>
            <tbody>
              {data.queues.map((q) => (
                <tr key={q.queue} data-testid="queue-row" data-queue={q.queue}>
                  <td>
                    <a href={link('/runs', { queue: q.queue })}>{q.queue}</a>
                  </td>
                  <td data-testid="queue-queued">{q.queued}</td>
                  <td>{q.scheduled}</td>
                  <td>{q.running}</td>
                  <td>{q.oldestQueuedAt ? ago(q.oldestQueuedAt, now) : '—'}</td>
                  <td data-testid="queue-ended">{q.ended5m ?? '—'}</td>
                  <td>{q.paused ? 'paused' : 'active'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <Empty testid="queues-empty">No queue yet: queues appear when a workflow is registered.</Empty>
      )}
    </>
  );
}

export const QueuesPage: PageDef<{ queues: QueueRow[] }> = {
  title: () => 'Queues',
  load: () => get('/queues'),
  View: QueuesView,
};
