import { ErrorBlock } from '../components/error-block';
import { JsonView } from '../components/json-view';
import { RunLink, StatusBadge } from '../components/status';
import { usePage } from '../context';
import { clock, duration, time } from '../format';
import type { Step } from '../types';
import { stepKind, stepSpan } from './waterfall';

/** One step in full: output, every try with its error, duration and attempt; what it waits for. */
export function StepPanel({ step, runId, onClose }: { step: Step; runId: string; onClose: () => void }) {
  const { zone } = usePage();
  const kind = stepKind(step);
  return (
    <section class="panel" aria-labelledby="step-title" data-testid="step-panel">
      <h2 id="step-title">
        Step <code>{step.name}</code>{' '}
        <button type="button" class="link" onClick={onClose} data-testid="step-close">
          Close
        </button>
      </h2>
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <StatusBadge status={step.status} />
          {kind ? ` · ${kind}` : ''}
        </dd>
        <dt>Run attempt</dt>
        <dd>{step.attempt}</dd>
        {step.startedAt !== undefined ? (
          <>
            <dt>Started</dt>
            <dd>{time(step.startedAt, zone)}</dd>
          </>
        ) : null}
        {step.finishedAt !== undefined ? (
          <>
            <dt>Finished</dt>
            <dd>
              {time(step.finishedAt, zone)}
              {step.startedAt !== undefined ? ` (${triesSpan(step) ? 'last try ' : ''}${duration(step.finishedAt - step.startedAt)}${triesSpan(step)})` : ''}
            </dd>
          </>
        ) : null}
        {step.wakeAt ? (
          <>
            <dt>{step.status === 'waiting' && (step.signal || step.event) ? 'Deadline' : 'Wakes at'}</dt>
            <dd>{time(step.wakeAt, zone)}</dd>
          </>
        ) : null}
        {step.childRunId ? (
          <>
            <dt>Child run</dt>
            <dd>
              <RunLink id={step.childRunId} />
            </dd>
          </>
        ) : null}
        {step.match && Object.keys(step.match).length ? (
          <>
            <dt>Event match</dt>
            <dd>
              <code>{JSON.stringify(step.match)}</code>
            </dd>
          </>
        ) : null}
        {step.retryAt ? (
          <>
            <dt>Next try</dt>
            <dd>{time(step.retryAt, zone)}</dd>
          </>
        ) : null}
      </dl>
      <p class="muted small">A step's input is the run's input and the outputs of the steps before it: the journal stores outputs only.</p>
      {step.output ? <JsonView preview={step.output} runId={runId} field={`step:${step.name}`} testid="step-panel-output" label="Output" /> : null}
      <ErrorBlock error={step.error} testid="step-panel-error" />
      {step.tries?.length ? (
        <>
          <h3>Tries</h3>
          <table data-testid="step-panel-tries">
            <thead>
              <tr>
                <th scope="col">Try</th>
                <th scope="col">Attempt</th>
                <th scope="col">Started</th>
                <th scope="col">Duration</th>
                <th scope="col">Error</th>
              </tr>
            </thead>
            <tbody>
              {step.tries.map((t, i) => (
                <tr key={i} data-testid="try-row">
                  <td>{i + 1}</td>
                  <td>{t.attempt}</td>
                  <td>{clock(t.startedAt, zone)}</td>
                  <td>{duration(t.finishedAt - t.startedAt)}</td>
                  <td>{t.error ? <ErrorBlock error={t.error} /> : 'succeeded'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      ) : step.lastError ? (
        <>
          <h3>Last failed try</h3>
          <ErrorBlock error={step.lastError} />
        </>
      ) : null}
    </section>
  );
}

/** For a retried step: how long all its tries took, from the first one's start. */
function triesSpan(step: Step): string {
  const { from, to } = stepSpan(step);
  if (!step.tries || step.tries.length < 2 || from === undefined || to === undefined) return '';
  return `; ${step.tries.length} tries over ${duration(to - from)}`;
}
