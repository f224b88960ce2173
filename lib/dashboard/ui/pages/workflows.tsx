import { get } from '../api';
import { Empty } from '../components/status';
import { usePage } from '../context';
import { interval, time } from '../format';
import type { PageDef } from '../router';
import { link } from '../router';

interface WorkflowRow {
  name: string;
  queue: string;
  version?: number;
  versions?: Array<{ version: number; workers: string[]; noWorker?: string }>;
  maxAttempts: number;
  maxConcurrency: number | null;
  events: string[];
  owner?: string;
}
export interface CronRow {
  id: string;
  source: string;
  workflow: string;
  expression?: string;
  every?: number;
  timezone?: string;
  nextAt?: number;
}
interface Data {
  workflows: WorkflowRow[];
  crons: CronRow[];
}

// Each registered version with its live workers; a version whose runs have no worker says so.
function Versions({ w }: { w: WorkflowRow }) {
  const versions = w.versions ?? [];
  if (!versions.length) return <>v{w.version ?? 1}</>;
  return (
    <>
      {versions.map((v) => (
        <div key={v.version}>
          {v.noWorker ? (
            <strong data-testid="version-no-worker">{v.noWorker}</strong>
          ) : (
            `v${v.version}: ${v.workers.length} worker(s)${v.version === w.version ? ' (latest)' : ''}`
          )}
        </div>
      ))}
    </>
  );
}

export const schedule = (c: { expression?: string; every?: number; rrule?: string }) =>
  c.expression !== undefined ? <code>{c.expression}</code> : c.every ? `every ${interval(c.every)}` : c.rrule ? <code>{c.rrule}</code> : '';

function WorkflowsView({ data }: { data: Data }) {
  const { zone } = usePage();
  return (
    <>
      <h1>Workflows</h1>
      {data.workflows.length ? (
        <div class="table-wrap">
          <table data-testid="workflows-table">
            <thead>
              <tr>
                {['Workflow', 'Queue', 'Versions', 'Max attempts', 'Max concurrency', 'Events', 'Owner'].map((h) => (
                  <th key={h} scope="col">
                    {h}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {data.workflows.map((w) => (
                <tr key={w.name}>
                  <td>
                    <a href={link('/runs', { workflow: w.name })}>{w.name}</a>
                  </td>
                  <td>{w.queue}</td>
                  <td>
                    <Versions w={w} />
                  </td>
                  <td>{w.maxAttempts}</td>
                  <td>{w.maxConcurrency === null ? 'unlimited' : w.maxConcurrency}</td>
                  <td>{w.events.join(', ')}</td>
                  <td>{w.owner}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <Empty>No workflow is registered under this prefix: start a worker, or check the prefix.</Empty>
      )}
      <h2>Cron schedules</h2>
      {data.crons.length ? (
        <div class="table-wrap">
          {/* source: "definition" (a workflow's cron trigger) or "runtime" (client.schedule). */}
          <table data-testid="crons-table">
            <thead>
              <tr>
                {['Id', 'Source', 'Workflow', 'Schedule', 'Time zone', 'Next tick'].map((h) => (
                  <th key={h} scope="col">
                    {h}
                  </th>
                ))}
              </tr>
            </thead>
            <tbody>
              {data.crons.map((c) => (
                <tr key={c.id}>
                  <td>{c.id}</td>
                  <td>{c.source}</td>
                  <td>{c.workflow}</td>
                  <td>{schedule(c)}</td>
                  <td>{c.timezone ?? ''}</td>
                  <td>{time(c.nextAt, zone)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : (
        <Empty>No cron schedule.</Empty>
      )}
    </>
  );
}

export const WorkflowsPage: PageDef<Data> = {
  title: () => 'Workflows',
  load: () => get<Data>('/workflows'),
  View: WorkflowsView,
};
