import { useEffect, useRef, useState } from 'preact/hooks';

import { get, query } from '../api';
import { ErrorBlock } from '../components/error-block';
import { JsonView } from '../components/json-view';
import { RunLink, StatusBadge } from '../components/status';
import { usePage } from '../context';
import { duration, time } from '../format';
import type { PageDef, Route } from '../router';
import { LIVE, type RunDetail, type Step } from '../types';
import { RunActions, SignalForm } from './run-actions';
import { RunHistory } from './run-history';
import { StepPanel } from './step-panel';
import { stepKind, stepSpan, Waterfall } from './waterfall';

const runIdOf = (route: Route) => decodeURIComponent(route.path.slice('/runs/'.length));

/** What a waiting step waits for: a signal, an event and its match, a child run, or a time. */
function WaitText({ step }: { step: Step }) {
  const { zone } = usePage();
  const until = step.wakeAt ? ` until ${time(step.wakeAt, zone)}` : '';
  if (step.signal !== undefined) return <span data-testid="step-wait">{`signal "${step.signal}"${until}`}</span>;
  if (step.event !== undefined) {
    const match = Object.keys(step.match ?? {}).length ? ` matching ${JSON.stringify(step.match)}` : '';
    return <span data-testid="step-wait">{`event "${step.event}"${match}${until}`}</span>;
  }
  if (step.childRunId) return <RunLink id={step.childRunId} />;
  return <>{step.wakeAt ? `until ${time(step.wakeAt, zone)}` : ''}</>;
}

function Facts({ d }: { d: RunDetail }) {
  const { zone, now } = usePage();
  const { run } = d;
  const end = run.finishedAt ?? (LIVE.includes(run.status) ? now : undefined);
  const row = (label: string, value: preact.ComponentChildren, testid?: string) =>
    value === undefined || value === null || value === '' ? null : (
      <>
        <dt>{label}</dt>
        <dd data-testid={testid}>{value}</dd>
      </>
    );
  return (
    <dl class="facts" data-testid="run-facts">
      {row('Workflow', `${run.workflow}${run.version !== undefined ? ` v${run.version}` : ''}`)}
      {row('Queue', run.queue)}
      {row('Attempt', `${run.attempt} of ${run.maxAttempts}`)}
      {row('Created', time(run.createdAt, zone))}
      {row('First started', time(run.startedAt, zone), 'run-started')}
      {row('Finished', time(run.finishedAt, zone))}
      {row('Duration', run.startedAt && end ? duration(end - run.startedAt) : undefined, 'run-duration')}
      {row('Timeout at', d.deadline ? time(d.deadline, zone) : undefined)}
      {row('Idempotency key', run.idempotencyKey)}
      {row('Parent', run.parentId ? <RunLink id={run.parentId} /> : undefined)}
      {d.children.length
        ? row(
            'Children',
            <>
              {d.children.map((c) => (
                <div key={c}>
                  <RunLink id={c} />
                </div>
              ))}
              {d.moreChildren ? <div class="muted">and {d.moreChildren} more</div> : null}
            </>,
          )
        : null}
      {row('Cancel reason', run.cancelReason)}
      {run.compensated ? row('Compensated', 'yes: every compensation of its completed steps ran', 'run-compensated') : null}
      {d.compensation && d.compensation.state !== 'none' ? row('Compensation', d.compensation.state, 'run-compensation-state') : null}
      {run.compensationError ? row('Compensation error', `${run.compensationError.name}: ${run.compensationError.message}`, 'run-compensation-error') : null}
      {d.patches && Object.keys(d.patches).length
        ? row(
            'Patches',
            Object.entries(d.patches)
              .map(([id, on]) => `${id}: ${on ? 'patched code' : 'old code'}`)
              .join(', '),
            'run-patches',
          )
        : null}
    </dl>
  );
}

function Steps({ d, onSelect }: { d: RunDetail; onSelect: (name: string) => void }) {
  const { run, steps } = d;
  return (
    <div class="table-wrap">
      <table data-testid="steps">
        <thead>
          <tr>
            <th scope="col">#</th>
            <th scope="col">Step</th>
            <th scope="col">Status</th>
            <th scope="col">Attempt</th>
            <th scope="col">Duration or wait</th>
          </tr>
        </thead>
        <tbody>
          {steps.map((s) => {
            const span = stepSpan(s);
            const took = span.to !== undefined && span.from !== undefined ? span.to - span.from : undefined;
            return (
              <tr key={s.name} data-testid="step-row">
                <td>{s.seq}</td>
                <td>
                  <button type="button" class="link" onClick={() => onSelect(s.name)} data-testid="step-open">
                    {s.name}
                  </button>
                  {stepKind(s) ? <span class="muted small"> {stepKind(s)}</span> : null}
                  {s.output ? <JsonView preview={s.output} runId={run.id} field={`step:${s.name}`} testid="step-output" label="output" open={false} /> : null}
                  {s.error ? (
                    <div class="error">
                      {s.error.name}: {s.error.message}
                    </div>
                  ) : null}
                </td>
                <td>
                  <StatusBadge status={s.status} />
                </td>
                <td>
                  {s.attempt}
                  {(s.attempts ?? 0) > 1 ? (
                    <div class="muted" data-testid="step-tries">
                      {s.attempts} tries{s.lastError ? `, last error ${s.lastError.name}: ${s.lastError.message}` : ''}
                    </div>
                  ) : null}
                </td>
                <td data-testid="step-duration" data-ms={took}>
                  {took !== undefined ? duration(took) : <WaitText step={s} />}
                </td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </div>
  );
}

function Attempts({ d }: { d: RunDetail }) {
  const { zone } = usePage();
  const attempts = d.attempts ?? [];
  if (!attempts.some((a) => a.error || a.outcome !== 'succeeded')) return null;
  return (
    <>
      <h2>Attempts</h2>
      <table data-testid="run-attempts">
        <thead>
          <tr>
            <th scope="col">Attempt</th>
            <th scope="col">Outcome</th>
            <th scope="col">Ended</th>
            <th scope="col">Error</th>
          </tr>
        </thead>
        <tbody>
          {attempts.map((a) => (
            <tr key={a.attempt} data-testid="attempt-row">
              <td>{a.attempt}</td>
              <td>
                <StatusBadge status={a.outcome} />
              </td>
              <td>{time(a.finishedAt, zone)}</td>
              <td>
                <ErrorBlock error={a.error} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  );
}

/** What the run waits for now, with a form to send a signal. */
function Waiting({ d }: { d: RunDetail }) {
  const { zone } = usePage();
  const waiting = d.steps.filter((s) => s.status === 'waiting');
  if (!LIVE.includes(d.run.status)) return null;
  const signal = waiting.find((s) => s.signal !== undefined)?.signal;
  return (
    <section class="panel" aria-labelledby="waiting-title" data-testid="run-waiting-panel">
      <h2 id="waiting-title">Waiting for</h2>
      {waiting.length ? (
        <ul>
          {waiting.map((s) => (
            <li key={s.name} data-testid="pending-wait">
              <code>{s.name}</code>:{' '}
              {s.signal !== undefined ? `signal "${s.signal}"` : s.event !== undefined ? `event "${s.event}"` : s.childRunId ? 'child run ' : 'a timer'}
              {s.childRunId ? <RunLink id={s.childRunId} /> : null}
              {s.match && Object.keys(s.match).length ? ` matching ${JSON.stringify(s.match)}` : ''}
              {s.wakeAt ? ` · ${s.signal !== undefined || s.event !== undefined ? 'deadline' : 'wakes at'} ${time(s.wakeAt, zone)}` : ''}
            </li>
          ))}
        </ul>
      ) : (
        <p class="muted">No step waits now.</p>
      )}
      <SignalForm runId={d.run.id} name={signal} />
    </section>
  );
}

function RunView({ data: d, route }: { data: RunDetail; route: Route }) {
  const { announce } = usePage();
  const [selected, setSelected] = useState<string>();
  const lastStatus = useRef<string | undefined>(undefined);
  const { run } = d;
  useEffect(() => {
    if (lastStatus.current && lastStatus.current !== run.status) announce(`Run ${run.id} is now ${run.status}.`);
    lastStatus.current = run.status;
  }, [run.status]);
  const step = d.steps.find((s) => s.name === selected);
  return (
    <>
      <h1>
        Run <code data-testid="run-id">{run.id}</code>
      </h1>
      <p data-testid="run-status">
        <StatusBadge status={run.status} /> · {run.workflow} on queue {run.queue} · attempt {`${run.attempt}/${run.maxAttempts}`}
      </p>
      <RunActions run={run} />
      <Facts d={d} />
      <Waiting d={d} />
      <Waterfall detail={d} selected={selected} onSelect={(name) => setSelected(name === selected ? undefined : name)} />
      {step ? <StepPanel step={step} runId={run.id} onClose={() => setSelected(undefined)} /> : null}
      {run.progress ? (
        <>
          <h2>Progress</h2>
          <JsonView preview={run.progress} runId={run.id} field="progress" testid="run-progress" />
        </>
      ) : null}
      {d.values && Object.keys(d.values).length ? (
        <>
          <h2>Values set with setEvent</h2>
          {Object.entries(d.values).map(([key, value]) => (
            <JsonView key={key} preview={value} runId={run.id} field={`value:${key}`} testid="run-value" label={key} />
          ))}
        </>
      ) : null}
      <h2>Input</h2>
      <JsonView preview={run.input} runId={run.id} field="input" testid="run-input" />
      {run.output ? (
        <>
          <h2>Output</h2>
          <JsonView preview={run.output} runId={run.id} field="output" testid="run-output" />
        </>
      ) : null}
      {run.error ? (
        <>
          <h2>Error</h2>
          <ErrorBlock error={run.error} testid="run-error" />
          <JsonView preview={run.error.detail} runId={run.id} field="error" testid="run-error-detail" label="Stored error" open={false} />
        </>
      ) : null}
      <Attempts d={d} />
      <h2>Steps</h2>
      <Steps d={d} onSelect={setSelected} />
      <RunHistory runId={run.id} key={route.path} />
    </>
  );
}

export const RunPage: PageDef<RunDetail> = {
  title: (route) => `Run ${runIdOf(route)}`,
  load: (route) => get<RunDetail>(`/run?${query({ id: runIdOf(route) })}`),
  live: (d) => LIVE.includes(d.run.status),
  View: RunView,
};
