import { act, get, query } from '../api';
import { useAction } from '../components/action';
import { Empty } from '../components/status';
import { usePage } from '../context';
import { ago } from '../format';
import type { PageDef } from '../router';
import { link } from '../router';
import type { QueueRow } from '../types';

/** Pause or resume a queue: hidden in read-only mode. */
function QueueActions({ row }: { row: QueueRow }) {
  const { meta, reload } = usePage();
  const { message, attempt } = useAction();
  if (meta.readOnly) return null;
  const { queue } = row;
  const pause = () =>
    attempt(async () => {
      const note = window.prompt(`Pause queue "${queue}"? Workers claim none of its runs until it is resumed; running runs go on. A note (optional):`, '');
      if (note === null) return;
      await act(`/queues/pause?${query({ queue, note })}`);
      reload();
    });
  const resume = () =>
    attempt(async () => {
      if (!window.confirm(`Resume queue "${queue}"? Workers claim its runs again.`)) return;
      await act(`/queues/resume?${query({ queue })}`);
      reload();
    });
  return (
    <>
      {row.paused ? (
        <button type="button" data-testid="queue-resume" onClick={() => void resume()}>
          Resume
        </button>
      ) : (
        <button type="button" data-testid="queue-pause" onClick={() => void pause()}>
          Pause
        </button>
      )}{' '}
      <span class="error" role="alert">
        {message}
      </span>
    </>
  );
}

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
                <th scope="col">
                  <span class="sr-only">Actions</span>
                </th>
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
                  <td data-testid="queue-state">{q.paused ? `paused${q.pause?.note ? `: ${q.pause.note}` : ''}` : 'active'}</td>
                  <td>
                    <QueueActions row={q} />
                  </td>
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
