import { useState } from 'preact/hooks';

import { get, query } from '../api';
import { errorText } from '../components/action';
import { usePage } from '../context';
import { clock } from '../format';
import type { HistoryEvent } from '../types';

/** The run's entries of the event stream, read when asked for (it is a bounded scan of the stream). */
export function RunHistory({ runId }: { runId: string }) {
  const { zone } = usePage();
  const [history, setHistory] = useState<{ events: HistoryEvent[]; scanned: number; complete: boolean }>();
  const [message, setMessage] = useState('');
  async function load() {
    setMessage('');
    try {
      setHistory(await get(`/run/history?${query({ id: runId })}`));
    } catch (error) {
      setMessage(errorText(error));
    }
  }
  return (
    <section aria-labelledby="history-title" data-testid="run-history">
      <h2 id="history-title">Event history</h2>
      <button type="button" onClick={() => void load()} data-testid="history-load">
        {history ? 'Read again' : 'Read the event history'}
      </button>{' '}
      <span class="error">{message}</span>
      {history ? (
        history.events.length ? (
          <>
            <ol class="history">
              {history.events.map((e) => {
                const { id, type, at, ...rest } = e;
                const extra = Object.entries(rest).filter(([key]) => key !== 'runId' && key !== 'workflow');
                return (
                  <li key={id} data-testid="history-event">
                    <span class="muted">{at ? clock(at, zone) : id}</span> <b>{type}</b>{' '}
                    {extra.length ? <code>{extra.map(([k, v]) => `${k}=${typeof v === 'string' ? v : JSON.stringify(v)}`).join(' ')}</code> : null}
                  </li>
                );
              })}
            </ol>
            {!history.complete ? (
              <p class="muted">Read from the last {history.scanned} entries of the stream: older entries were not read or were trimmed.</p>
            ) : null}
          </>
        ) : (
          <p class="muted">The stream holds no entry of this run (it keeps the most recent entries only).</p>
        )
      ) : null}
    </section>
  );
}
