import { usePage } from '../context';
import { clock, duration } from '../format';
import type { RunDetail, Step } from '../types';

/** One bar on a row: from `from` to `to` (ms), of a kind the legend names. */
interface Segment {
  from: number;
  to: number;
  kind: 'queued' | 'run' | 'ok' | 'failed' | 'delay' | 'wait' | 'waiting' | 'compensation' | 'interrupted';
  label: string;
}
interface Row {
  key: string;
  label: string;
  detail: string;
  segments: Segment[];
  /** A step row selects the step. */
  step?: string;
  indent?: boolean;
}

const LEGEND: Array<[Segment['kind'], string]> = [
  ['queued', 'queued'],
  ['run', 'attempt'],
  ['ok', 'step ran'],
  ['failed', 'try failed'],
  ['delay', 'retry delay'],
  ['wait', 'waited'],
  ['waiting', 'waiting now'],
  ['compensation', 'compensation'],
];

/** What a step is: a wait of some kind, or a function. */
export function stepKind(s: Step): string {
  if (s.signal !== undefined) return `signal "${s.signal}"`;
  if (s.event !== undefined) return `event "${s.event}"`;
  if (s.childRunId) return 'child run';
  if (s.wakeAt !== undefined && !s.tries) return 'sleep';
  return '';
}

/** When a step began (its first try, for a retried step) and ended: what its duration spans. */
export function stepSpan(s: Step): { from?: number; to?: number } {
  return { from: s.tries?.[0]?.startedAt ?? s.startedAt, to: s.finishedAt };
}

function stepSegments(s: Step, now: number): Segment[] {
  const out: Segment[] = [];
  if (s.tries?.length) {
    s.tries.forEach((t, i) => {
      const next = s.tries![i + 1];
      out.push({
        from: t.startedAt,
        to: t.finishedAt,
        kind: t.error ? 'failed' : 'ok',
        label: `try ${i + 1}${t.error ? `: ${t.error.name}: ${t.error.message}` : ''}`,
      });
      if (next && next.startedAt > t.finishedAt) out.push({ from: t.finishedAt, to: next.startedAt, kind: 'delay', label: `retry delay before try ${i + 2}` });
    });
    const last = s.tries[s.tries.length - 1];
    if (s.retryAt && s.retryAt > last.finishedAt) out.push({ from: last.finishedAt, to: s.retryAt, kind: 'delay', label: 'retry due' });
    return out;
  }
  const waitsFor = stepKind(s);
  if (s.status === 'waiting') {
    const from = s.startedAt ?? now;
    out.push({ from, to: Math.max(now, from), kind: 'waiting', label: `waiting for ${waitsFor || 'a wake-up'}` });
    if (s.wakeAt && s.wakeAt > now) out.push({ from: now, to: s.wakeAt, kind: 'delay', label: 'until its deadline' });
    return out;
  }
  if (s.startedAt !== undefined && s.finishedAt !== undefined) {
    const kind = s.status === 'failed' ? 'failed' : waitsFor ? 'wait' : 'ok';
    out.push({ from: s.startedAt, to: s.finishedAt, kind, label: `${s.status}${waitsFor ? ` (${waitsFor})` : ''}` });
  } else if (s.wakeAt !== undefined) {
    out.push({ from: s.wakeAt, to: s.wakeAt, kind: 'wait', label: `slept until ${s.wakeAt}` });
  }
  return out;
}

/** The rows of a run's waterfall: the run, each attempt, each step's tries and waits, compensations. */
export function waterfallRows(d: RunDetail, now: number): Row[] {
  const { run, steps } = d;
  const end = run.finishedAt ?? now;
  const rows: Row[] = [];
  const runSegments: Segment[] = [];
  if (run.startedAt && run.startedAt > run.createdAt) runSegments.push({ from: run.createdAt, to: run.startedAt, kind: 'queued', label: 'queued' });
  if (run.startedAt) runSegments.push({ from: run.startedAt, to: end, kind: 'run', label: run.finishedAt ? run.status : 'going on' });
  rows.push({ key: 'run', label: 'run', detail: duration(end - run.createdAt), segments: runSegments });

  const attempts = d.attempts ?? [];
  let previousEnd = run.startedAt ?? run.createdAt;
  for (let n = 1; n <= run.attempt; n++) {
    const record = attempts.find((a) => a.attempt === n);
    const starts = steps.filter((s) => s.attempt === n && s.startedAt !== undefined).map((s) => s.startedAt!);
    const from = n === 1 ? (run.startedAt ?? run.createdAt) : Math.min(...starts, record?.finishedAt ?? end);
    const to = record?.finishedAt ?? (n === run.attempt ? end : Math.max(from, ...starts));
    if (n > 1 && from > previousEnd) rows[rows.length - 1]?.segments.push({ from: previousEnd, to: from, kind: 'delay', label: `backoff before attempt ${n}` });
    rows.push({
      key: `attempt-${n}`,
      label: `attempt ${n}`,
      detail: record ? record.outcome : n === run.attempt ? run.status : '',
      segments: [{ from, to, kind: record && record.outcome !== 'succeeded' ? 'failed' : 'run', label: `attempt ${n}${record ? `: ${record.outcome}` : ''}` }],
    });
    previousEnd = to;
    for (const s of steps.filter((step) => step.attempt === n).sort((a, b) => a.seq - b.seq)) {
      const { from, to = s.status === 'waiting' ? now : undefined } = stepSpan(s);
      rows.push({
        key: `step-${s.name}`,
        label: s.name,
        detail: [stepKind(s), from !== undefined && to !== undefined ? duration(to - from) : '', s.tries && s.tries.length > 1 ? `${s.tries.length} tries` : '']
          .filter(Boolean)
          .join(' · '),
        segments: stepSegments(s, now),
        step: s.name,
        indent: true,
      });
    }
  }
  for (const c of d.compensation?.steps ?? []) {
    const drawn = c.startedAt !== undefined && c.finishedAt !== undefined;
    rows.push({
      key: `comp-${c.step}`,
      label: `undo ${c.step}`,
      detail: [c.state, drawn ? duration(c.finishedAt! - c.startedAt!) : ''].filter(Boolean).join(' · '),
      segments: drawn ? [{ from: c.startedAt!, to: c.finishedAt!, kind: 'compensation', label: `compensation of ${c.step}` }] : [],
      indent: true,
    });
  }
  return rows;
}

/** A waterfall of the run on a real time axis; a step's row opens its detail. */
export function Waterfall({ detail, selected, onSelect }: { detail: RunDetail; selected?: string; onSelect: (step: string) => void }) {
  const { now, zone } = usePage();
  const rows = waterfallRows(detail, now);
  const times = rows.flatMap((r) => r.segments.flatMap((s) => [s.from, s.to]));
  const t0 = Math.min(detail.run.createdAt, ...times);
  const t1 = Math.max(t0 + 1, ...times);
  const span = t1 - t0;
  const pct = (ms: number) => `${(((ms - t0) / span) * 100).toFixed(3)}%`;
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((f) => t0 + f * span);
  return (
    <section aria-labelledby="waterfall-title" class="waterfall" data-testid="waterfall">
      <h2 id="waterfall-title">Timeline</h2>
      <p class="muted small">
        From {clock(t0, zone)} to {clock(t1, zone)} ({duration(span)}). Select a step to see its input, output and tries.
      </p>
      <ul class="legend" aria-label="Legend">
        {LEGEND.map(([kind, text]) => (
          <li key={kind}>
            <span class={`swatch seg-${kind}`} aria-hidden="true" /> {text}
          </li>
        ))}
      </ul>
      <div class="wf-axis" aria-hidden="true">
        {ticks.map((t, i) => (
          <span key={i} style={{ left: pct(t) }}>
            +{duration(t - t0)}
          </span>
        ))}
      </div>
      <ol class="wf-rows">
        {rows.map((row) => {
          const label = (
            <>
              <span class="wf-name">{row.label}</span> <span class="muted small">{row.detail}</span>
            </>
          );
          return (
            <li
              key={row.key}
              class={`wf-row${row.indent ? ' indent' : ''}${row.step && row.step === selected ? ' selected' : ''}`}
              data-testid="wf-row"
              data-row={row.key}
            >
              {row.step ? (
                <button type="button" class="wf-label" data-testid="wf-step" aria-pressed={row.step === selected} onClick={() => onSelect(row.step!)}>
                  {label}
                </button>
              ) : (
                <span class="wf-label">{label}</span>
              )}
              <span class="wf-track">
                {row.segments.map((s, i) => (
                  <span
                    key={i}
                    class={`wf-seg seg-${s.kind}`}
                    data-testid="wf-seg"
                    data-kind={s.kind}
                    data-from={s.from}
                    data-to={s.to}
                    title={`${s.label}: ${clock(s.from, zone)} → ${clock(s.to, zone)} (${duration(s.to - s.from)})`}
                    style={{ left: pct(s.from), width: `max(2px, ${(((s.to - s.from) / span) * 100).toFixed(3)}%)` }}
                  />
                ))}
              </span>
            </li>
          );
        })}
      </ol>
    </section>
  );
}
