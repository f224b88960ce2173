import { useState } from 'preact/hooks';

import { act, query } from '../api';
import { errorText } from '../components/action';
import { usePage } from '../context';
import { navigate, runHref } from '../router';
import { ENDED_BADLY, LIVE, type RunDetail } from '../types';

type Action = 'cancel' | 'terminate' | 'rerun' | 'resume' | 'delete';

/** The run's actions, each confirmed with the run named; none in read-only mode. */
export function RunActions({ run }: { run: RunDetail['run'] }) {
  const { meta, reload } = usePage();
  const [message, setMessage] = useState('');
  const live = ['scheduled', 'queued', 'running'].includes(run.status);
  const terminable = LIVE.includes(run.status);
  const id = run.id;
  async function perform(kind: Action, extra: Record<string, string> = {}) {
    setMessage('');
    try {
      const result = await act<{ deleted?: boolean; runId?: string }>(`/run/${kind}?${query({ id, ...extra })}`);
      if (result.deleted) navigate('#/runs');
      else if (result.runId && result.runId !== id) navigate(runHref(result.runId));
      else reload();
    } catch (error) {
      setMessage(errorText(error));
    }
  }
  const confirmed = (text: string, kind: Action, extra?: Record<string, string>) => () => window.confirm(text) && void perform(kind, extra);
  if (meta.readOnly) return <p class="muted">Read-only: actions are disabled.</p>;
  return (
    <p class="actions">
      <button type="button" data-testid="cancel" disabled={!live} onClick={confirmed(`Cancel run ${id}?`, 'cancel')}>
        Cancel
      </button>{' '}
      <button
        type="button"
        data-testid="cancel-compensate"
        title="Cancel, then run the compensations of its completed steps"
        disabled={!live}
        onClick={confirmed(`Cancel run ${id} and run the compensations of its completed steps?`, 'cancel', { compensate: '1' })}
      >
        Cancel and compensate
      </button>{' '}
      <button
        type="button"
        data-testid="terminate"
        title="End it now: no cleanup, no onFailure"
        disabled={!terminable}
        onClick={confirmed(`Terminate run ${id} now, without cleanup?`, 'terminate')}
      >
        Terminate
      </button>{' '}
      <button
        type="button"
        data-testid="rerun"
        disabled={!ENDED_BADLY.includes(run.status)}
        onClick={confirmed(`Start a new run with the input of run ${id}?`, 'rerun')}
      >
        Re-run
      </button>{' '}
      <button
        type="button"
        data-testid="resume"
        title="Go on from the first incomplete step (or compensation), under the same id"
        disabled={![...ENDED_BADLY, 'compensation_failed'].includes(run.status)}
        onClick={confirmed(`Resume run ${id} from its first incomplete step?`, 'resume')}
      >
        Resume
      </button>{' '}
      <button
        type="button"
        data-testid="delete"
        title={terminable ? 'Terminate it and delete it with its steps' : 'Delete it with its steps'}
        onClick={confirmed(terminable ? `Terminate and delete run ${id}?` : `Delete run ${id} and its steps?`, 'delete', terminable ? { force: '1' } : {})}
      >
        Delete
      </button>{' '}
      <span class="error" data-testid="action-message" role="alert">
        {message}
      </span>
    </p>
  );
}

/** Send a signal: a name and a JSON payload, confirmed with the run named. */
export function SignalForm({ runId, name: suggested }: { runId: string; name?: string }) {
  const { meta, reload } = usePage();
  const [message, setMessage] = useState('');
  if (meta.readOnly) return null;
  async function submit(e: Event) {
    e.preventDefault();
    const form = new FormData(e.currentTarget as HTMLFormElement);
    const name = String(form.get('name') ?? '').trim();
    const payload = String(form.get('payload') ?? '').trim() || 'null';
    try {
      JSON.parse(payload);
    } catch {
      setMessage('The payload is not valid JSON.');
      return;
    }
    if (!name) {
      setMessage('Give the signal a name.');
      return;
    }
    if (!window.confirm(`Send signal "${name}" to run ${runId}?`)) return;
    try {
      const result = await act<{ delivered?: boolean; sent?: boolean }>(`/run/signal?${query({ id: runId, name, payload })}`);
      setMessage(result.delivered === false || result.sent === false ? 'The run has ended: the signal was not delivered.' : `Signal "${name}" sent.`);
      reload();
    } catch (error) {
      setMessage(errorText(error));
    }
  }
  return (
    <form class="signal-form" onSubmit={submit} data-testid="signal-form" aria-label="Send a signal">
      <label>
        Signal
        <input name="name" data-testid="signal-name" value={suggested ?? ''} required />
      </label>
      <label>
        Payload (JSON)
        <textarea name="payload" data-testid="signal-payload" rows={3} placeholder="null" />
      </label>
      <button type="submit" data-testid="signal-send">
        Send signal
      </button>{' '}
      <span data-testid="signal-message" role="status">
        {message}
      </span>
    </form>
  );
}
