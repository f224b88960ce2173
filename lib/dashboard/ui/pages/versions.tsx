import { get } from '../api';
import { Empty } from '../components/status';
import type { PageDef } from '../router';
import { link } from '../router';
import type { VersionsRow } from '../types';

function VersionsView({ data }: { data: { workflows: VersionsRow[] } }) {
  const missing = data.workflows.flatMap((w) => (w.missing ?? []).map((v) => `${w.name} v${v}`));
  return (
    <>
      <h1>Versions</h1>
      {missing.length ? (
        <p class="banner" role="note" data-testid="versions-missing">
          {missing.map((m) => `No worker for ${m}`).join('. ')}: its runs wait until a worker of that version starts.
        </p>
      ) : null}
      {data.workflows.length ? (
        <div class="table-wrap">
          <table data-testid="versions-table">
            <thead>
              <tr>
                <th scope="col">Workflow</th>
                <th scope="col">Version</th>
                <th scope="col">Unfinished runs</th>
                <th scope="col">Live workers</th>
              </tr>
            </thead>
            <tbody>
              {data.workflows.flatMap((w) =>
                w.versions.map((v) => (
                  <tr key={`${w.name}:${v.version}`} data-testid="version-row" data-missing={(w.missing ?? []).includes(v.version) || undefined}>
                    <td>
                      <a href={link('/runs', { workflow: w.name })}>{w.name}</a>
                    </td>
                    <td>
                      <a href={link('/runs', { workflow: w.name, version: v.version })}>v{v.version}</a>
                      {v.version === w.latest ? <span class="muted"> (latest)</span> : null}
                    </td>
                    <td>{v.unfinished ? 'yes' : 'none'}</td>
                    <td>{(w.missing ?? []).includes(v.version) ? <strong>none</strong> : v.workers.length}</td>
                  </tr>
                )),
              )}
            </tbody>
          </table>
        </div>
      ) : (
        <Empty>No workflow is registered under this prefix.</Empty>
      )}
    </>
  );
}

export const VersionsPage: PageDef<{ workflows: VersionsRow[] }> = {
  title: () => 'Versions',
  load: () => get('/versions'),
  View: VersionsView,
};
