// The dashboard page: plain DOM, no framework, no build step. Every value from Redis is written
// with textContent, never as HTML, so run inputs and errors cannot inject markup.
'use strict';
(function () {
  const base = document.body.dataset.base;
  const csrf = document.querySelector('meta[name="redflow-csrf"]').content;
  const view = document.getElementById('view');
  const notice = document.getElementById('notice');
  const POLL_MS = 1500;
  const MAX_BACKOFF_MS = 30000;
  const STATUSES = ['scheduled', 'queued', 'running', 'compensating', 'succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated'];
  let meta = { readOnly: true, prefix: '' };
  let timer;
  let failures = 0;
  // Each render has a number; a reply for an older one (the user moved on meanwhile) is dropped.
  let generation = 0;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key.startsWith('on')) node.addEventListener(key.slice(2), value);
      else if (key === 'style')
        node.style.cssText = value; // CSSOM, allowed by the page's CSP
      else node.setAttribute(key, value === true ? '' : String(value));
    }
    for (const child of children.flat()) if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
    return node;
  }
  const time = (ms) => (ms ? new Date(ms).toLocaleString() : '');
  // An interval in the largest unit that divides it: 90000 → "90s", 7200000 → "2h".
  const interval = (ms) => {
    for (const [unit, size] of [
      ['d', 86_400_000],
      ['h', 3_600_000],
      ['m', 60_000],
      ['s', 1_000],
    ])
      if (ms % size === 0) return `${ms / size}${unit}`;
    return `${ms}ms`;
  };
  const statusEl = (status) => el('span', { class: `status status-${status}`, 'data-testid': 'status' }, status);
  const runLink = (id) => el('a', { href: `#/runs/${encodeURIComponent(id)}`, 'data-testid': 'run-link' }, id);
  const runQuery = (id) => `id=${encodeURIComponent(id)}`;

  // Errors carry the server's code (REDIS_UNAVAILABLE, RUN_NOT_FOUND, ...) and its one sentence.
  async function api(path, init) {
    const res = await fetch(`${base}/api${path}`, init);
    const body = await res.json().catch(() => ({}));
    if (!res.ok) throw Object.assign(new Error(body.message || `The server answered ${res.status}.`), { code: body.code, status: res.status });
    return body;
  }
  // Actions are JSON, carry the page's token and are same-origin: what the server checks against CSRF.
  const act = (path) => api(path, { method: 'POST', headers: { 'content-type': 'application/json', 'x-redflow-csrf': csrf }, body: '{}' });

  // A payload preview: the text, and when it was cut, its size and a link to the whole of it.
  function payload(preview, id, field, testid) {
    if (!preview) return null;
    return [
      el('pre', { 'data-testid': testid }, preview.text),
      preview.truncated
        ? el(
            'p',
            { class: 'muted', 'data-testid': `${testid}-truncated` },
            `Showing the first 64 KiB of ${Math.ceil(preview.bytes / 1024)} KiB. `,
            el('a', { href: `${base}/api/run/payload?${runQuery(id)}&field=${encodeURIComponent(field)}`, download: '' }, 'Show all (download)'),
          )
        : null,
    ];
  }

  function parseHash() {
    const [path, queryString] = location.hash.replace(/^#/, '').split('?');
    return { path: path || '/', query: new URLSearchParams(queryString || '') };
  }

  async function overview() {
    const stats = await api('/overview');
    const max = Math.max(1, ...stats.perMinute.map((m) => m.succeeded + m.failed));
    const width = 600,
      height = 100,
      step = width / stats.perMinute.length;
    const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
    svg.setAttribute('class', 'chart');
    svg.setAttribute('viewBox', `0 0 ${width} ${height}`);
    svg.setAttribute('preserveAspectRatio', 'none');
    stats.perMinute.forEach((m, i) => {
      let y = height;
      for (const [count, color] of [
        [m.succeeded, '#1a7f37'],
        [m.failed, '#cf222e'],
      ]) {
        if (!count) continue;
        const h = (count / max) * height;
        y -= h;
        const rect = document.createElementNS('http://www.w3.org/2000/svg', 'rect');
        rect.setAttribute('x', String(i * step + 1));
        rect.setAttribute('y', String(y));
        rect.setAttribute('width', String(Math.max(1, step - 2)));
        rect.setAttribute('height', String(h));
        rect.setAttribute('fill', color);
        const title = document.createElementNS('http://www.w3.org/2000/svg', 'title');
        title.textContent = `${new Date(m.minute).toLocaleTimeString()}: ${m.succeeded} succeeded, ${m.failed} failed`;
        rect.append(title);
        svg.append(rect);
      }
    });
    return [
      el('h2', {}, 'Overview'),
      el(
        'div',
        { class: 'cards', 'data-testid': 'status-counts' },
        STATUSES.map((s) => el('a', { class: 'card', href: `#/runs?status=${s}` }, el('b', {}, stats.byStatus[s]), statusEl(s))),
      ),
      el('h3', {}, 'Ended runs per minute, last hour (green: succeeded, red: failed)'),
      svg,
      el('h3', {}, 'Runs per workflow'),
      el(
        'table',
        {},
        el(
          'tbody',
          {},
          Object.entries(stats.byWorkflow).map(([name, count]) =>
            el('tr', {}, el('td', {}, el('a', { href: `#/runs?workflow=${encodeURIComponent(name)}` }, name)), el('td', {}, count)),
          ),
        ),
      ),
    ];
  }

  // The workflow filter's choices change rarely: read once a minute, not on every poll.
  const WORKFLOW_CHOICES_MS = 60000;
  let workflowChoices;
  async function workflowList() {
    if (!workflowChoices || Date.now() - workflowChoices.at > WORKFLOW_CHOICES_MS) {
      workflowChoices = { at: Date.now(), workflows: (await api('/workflows')).workflows };
    }
    return workflowChoices.workflows;
  }

  async function runs(query) {
    const workflow = query.get('workflow') || '';
    const status = query.get('status') || '';
    const offset = Number(query.get('offset') || 0);
    const limit = 25;
    const params = new URLSearchParams({ limit: String(limit), offset: String(offset) });
    if (workflow) params.set('workflow', workflow);
    if (status) params.set('status', status);
    const [workflows, page] = await Promise.all([workflowList(), api(`/runs?${params}`)]);
    const go = (changes) => {
      const next = new URLSearchParams({ workflow, status, offset: String(offset), ...changes });
      for (const [k, v] of [...next]) if (!v || (k === 'offset' && v === '0')) next.delete(k);
      location.hash = `#/runs?${next}`;
    };
    const workflowSelect = el(
      'select',
      { 'data-testid': 'filter-workflow', onchange: (e) => go({ workflow: e.target.value, offset: '0' }) },
      el('option', { value: '' }, 'all workflows'),
      workflows.map((w) => el('option', { value: w.name, selected: w.name === workflow }, w.name)),
    );
    const statusSelect = el(
      'select',
      { 'data-testid': 'filter-status', onchange: (e) => go({ status: e.target.value, offset: '0' }) },
      el('option', { value: '' }, 'all statuses'),
      STATUSES.map((s) => el('option', { value: s, selected: s === status }, s)),
    );
    return [
      el('h2', {}, 'Runs'),
      el('form', { class: 'filters', onsubmit: (e) => e.preventDefault() }, workflowSelect, statusSelect),
      el(
        'table',
        { 'data-testid': 'runs-table' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ['Run', 'Workflow', 'Status', 'Attempt', 'Created', 'Finished', 'Duration', 'Error'].map((h) => el('th', {}, h)),
          ),
        ),
        el(
          'tbody',
          {},
          page.runs.map((r) =>
            r.corrupt !== undefined
              ? el(
                  'tr',
                  { class: 'corrupt', 'data-testid': 'run-row', 'data-run-id': r.id, 'data-corrupt': '' },
                  el('td', {}, el('code', {}, r.id)),
                  el('td', {}, r.workflow || ''),
                  el('td', {}, 'corrupt'),
                  el('td', { colspan: 5 }, `Unreadable in Redis: ${r.corrupt}`),
                )
              : el(
                  'tr',
                  { 'data-testid': 'run-row', 'data-run-id': r.id },
                  el('td', {}, runLink(r.id)),
                  el('td', {}, r.workflow),
                  el('td', {}, statusEl(r.status)),
                  el('td', {}, `${r.attempt}/${r.maxAttempts}`),
                  el('td', {}, time(r.createdAt)),
                  el('td', {}, time(r.finishedAt)),
                  el('td', {}, r.durationMs !== undefined ? `${r.durationMs} ms` : ''),
                  el('td', { class: 'error' }, r.error ? `${r.error.name}: ${r.error.message}` : ''),
                ),
          ),
        ),
      ),
      page.runs.length ? null : el('p', { class: 'muted' }, 'No runs match.'),
      el(
        'p',
        {},
        el('button', { disabled: offset === 0, 'data-testid': 'page-prev', onclick: () => go({ offset: String(Math.max(0, offset - limit)) }) }, 'Newer'),
        ' ',
        el('button', { disabled: !page.hasMore, 'data-testid': 'page-next', onclick: () => go({ offset: String(offset + limit) }) }, 'Older'),
        ' ',
        page.runs.length ? el('span', { class: 'muted' }, `${offset + 1}–${offset + page.runs.length}`) : null,
      ),
    ];
  }

  async function runDetail(id) {
    const { run, steps, children, moreChildren, attempts } = await api(`/run?${runQuery(id)}`);
    const live = ['scheduled', 'queued', 'running'].includes(run.status);
    const message = el('span', { class: 'error', 'data-testid': 'action-message' });
    // A compensating run is not canceled, but a terminate ends it at once.
    const terminable = live || run.status === 'compensating';
    const action = async (kind, extra = '') => {
      try {
        const result = await act(`/run/${kind}?${runQuery(id)}${extra}`);
        // Resume answers with this run's own id: the hash stays, so render again.
        if (result.deleted) location.hash = '#/runs';
        else if (result.runId && result.runId !== id) location.hash = `#/runs/${encodeURIComponent(result.runId)}`;
        else render();
      } catch (error) {
        message.textContent = error.message;
      }
    };
    const longest = Math.max(1, ...steps.map((s) => (s.finishedAt && s.startedAt ? s.finishedAt - s.startedAt : 0)));
    return {
      live,
      nodes: [
        el('h2', {}, 'Run ', el('code', { 'data-testid': 'run-id' }, run.id)),
        el('p', {}, statusEl(run.status), ' · ', run.workflow, ' on queue ', run.queue, ' · attempt ', `${run.attempt}/${run.maxAttempts}`),
        el(
          'p',
          {},
          el('button', { 'data-testid': 'cancel', disabled: meta.readOnly || !live, onclick: () => action('cancel') }, 'Cancel'),
          ' ',
          el(
            'button',
            {
              'data-testid': 'terminate',
              title: 'End it now: no cleanup, no onFailure',
              disabled: meta.readOnly || !terminable,
              onclick: () => window.confirm(`Terminate run ${run.id} now, without cleanup?`) && action('terminate'),
            },
            'Terminate',
          ),
          ' ',
          el(
            'button',
            { 'data-testid': 'rerun', disabled: meta.readOnly || !['failed', 'canceled', 'terminated'].includes(run.status), onclick: () => action('rerun') },
            'Re-run',
          ),
          ' ',
          el(
            'button',
            {
              'data-testid': 'resume',
              title: 'Go on from the first incomplete step (or compensation), under the same id',
              disabled: meta.readOnly || !['failed', 'canceled', 'compensation_failed', 'terminated'].includes(run.status),
              onclick: () => action('resume'),
            },
            'Resume',
          ),
          ' ',
          el(
            'button',
            {
              'data-testid': 'delete',
              title: terminable ? 'Terminate it and delete it with its steps' : 'Delete it with its steps',
              disabled: meta.readOnly,
              onclick: () =>
                window.confirm(terminable ? `Terminate and delete run ${run.id}?` : `Delete run ${run.id} and its steps?`) &&
                action('delete', terminable ? '&force=1' : ''),
            },
            'Delete',
          ),
          ' ',
          message,
        ),
        el(
          'table',
          {},
          el(
            'tbody',
            {},
            el('tr', {}, el('th', {}, 'Created'), el('td', {}, time(run.createdAt))),
            el('tr', {}, el('th', {}, 'Started'), el('td', {}, time(run.startedAt))),
            el('tr', {}, el('th', {}, 'Finished'), el('td', {}, time(run.finishedAt))),
            run.parentId ? el('tr', {}, el('th', {}, 'Parent'), el('td', {}, runLink(run.parentId))) : null,
            children.length
              ? el(
                  'tr',
                  {},
                  el('th', {}, 'Children'),
                  el(
                    'td',
                    {},
                    children.map((c) => el('div', {}, runLink(c))),
                    moreChildren ? el('div', { class: 'muted' }, `and ${moreChildren} more`) : null,
                  ),
                )
              : null,
            run.cancelReason ? el('tr', {}, el('th', {}, 'Cancel reason'), el('td', {}, run.cancelReason)) : null,
            run.compensated
              ? el('tr', {}, el('th', {}, 'Compensated'), el('td', { 'data-testid': 'run-compensated' }, 'yes: every compensation of its completed steps ran'))
              : null,
            run.compensationError
              ? el(
                  'tr',
                  {},
                  el('th', {}, 'Compensation error'),
                  el('td', { class: 'error', 'data-testid': 'run-compensation-error' }, `${run.compensationError.name}: ${run.compensationError.message}`),
                )
              : null,
          ),
        ),
        run.progress !== undefined ? [el('h3', {}, 'Progress'), payload(run.progress, run.id, 'progress', 'run-progress')] : null,
        el('h3', {}, 'Input'),
        payload(run.input, run.id, 'input', 'run-input'),
        run.output !== undefined ? [el('h3', {}, 'Output'), payload(run.output, run.id, 'output', 'run-output')] : null,
        run.error
          ? [
              el('h3', {}, 'Error'),
              el('p', { class: 'error', 'data-testid': 'run-error' }, `${run.error.name}: ${run.error.message}`),
              run.error.stack ? el('details', {}, el('summary', {}, 'Stack'), el('pre', { 'data-testid': 'run-error-stack' }, run.error.stack)) : null,
              el('details', {}, el('summary', {}, 'Stored error'), payload(run.error.detail, run.id, 'error', 'run-error-detail')),
            ]
          : null,
        attemptsSection(attempts || []),
        el('h3', {}, 'Steps'),
        el(
          'table',
          { 'data-testid': 'steps' },
          el(
            'thead',
            {},
            el(
              'tr',
              {},
              ['#', 'Step', 'Status', 'Attempt', 'Duration', ''].map((h) => el('th', {}, h)),
            ),
          ),
          el(
            'tbody',
            {},
            steps.map((s) => {
              const duration = s.finishedAt && s.startedAt !== undefined ? s.finishedAt - s.startedAt : undefined;
              return el(
                'tr',
                { 'data-testid': 'step-row' },
                el('td', {}, s.seq),
                el(
                  'td',
                  {},
                  s.name,
                  s.output !== undefined ? el('details', {}, el('summary', {}, 'output'), payload(s.output, run.id, `step:${s.name}`, 'step-output')) : null,
                  s.error ? el('div', { class: 'error' }, `${s.error.name}: ${s.error.message}`) : null,
                ),
                el('td', {}, statusEl(s.status)),
                el(
                  'td',
                  {},
                  s.attempt,
                  s.attempts > 1
                    ? el(
                        'div',
                        { class: 'muted', 'data-testid': 'step-tries' },
                        `${s.attempts} tries`,
                        s.lastError ? `, last error ${s.lastError.name}: ${s.lastError.message}` : '',
                      )
                    : null,
                  s.retryAt ? el('div', { class: 'muted' }, `retry at ${time(s.retryAt)}`) : null,
                ),
                el('td', {}, duration !== undefined ? `${duration} ms` : waitText(s)),
                el('td', { style: 'width:30%' }, duration !== undefined ? el('div', { class: 'bar', style: `width:${(duration / longest) * 100}%` }) : null),
              );
            }),
          ),
        ),
      ],
    };
  }

  /** The run's attempts when any failed: how each ended, when, and its error with its stack. */
  function attemptsSection(attempts) {
    if (!attempts.some((a) => a.error || a.outcome !== 'succeeded')) return null;
    return [
      el('h3', {}, 'Attempts'),
      el(
        'table',
        { 'data-testid': 'run-attempts' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ['Attempt', 'Outcome', 'Ended', 'Error'].map((h) => el('th', {}, h)),
          ),
        ),
        el(
          'tbody',
          {},
          attempts.map((a) =>
            el(
              'tr',
              { 'data-testid': 'attempt-row' },
              el('td', {}, a.attempt),
              el('td', {}, statusEl(a.outcome)),
              el('td', {}, time(a.finishedAt)),
              el(
                'td',
                {},
                a.error ? el('div', { class: 'error' }, `${a.error.name}: ${a.error.message}`) : '',
                a.error && a.error.stack ? el('details', {}, el('summary', {}, 'Stack'), el('pre', {}, a.error.stack)) : null,
              ),
            ),
          ),
        ),
      ),
    ];
  }

  /** What a waiting step waits for: a signal, an event and its match, a child run, or a time. */
  function waitText(s) {
    const until = s.wakeAt ? ` until ${time(s.wakeAt)}` : '';
    if (s.signal !== undefined) return el('span', { 'data-testid': 'step-wait' }, `signal "${s.signal}"${until}`);
    if (s.event !== undefined) {
      const match = Object.keys(s.match || {}).length ? ` matching ${JSON.stringify(s.match)}` : '';
      return el('span', { 'data-testid': 'step-wait' }, `event "${s.event}"${match}${until}`);
    }
    if (s.childRunId) return runLink(s.childRunId);
    return s.wakeAt ? `until ${time(s.wakeAt)}` : '';
  }

  // Each registered version with its live workers; a version whose runs have no worker says so.
  function versionsCell(w) {
    const versions = w.versions || [];
    if (!versions.length) return el('td', {}, `v${w.version || 1}`);
    return el(
      'td',
      {},
      versions.map((v) =>
        el(
          'div',
          {},
          v.noWorker
            ? el('strong', { 'data-testid': 'version-no-worker' }, v.noWorker)
            : `v${v.version}: ${v.workers.length} worker(s)${v.version === w.version ? ' (latest)' : ''}`,
        ),
      ),
    );
  }

  async function workflowsPage() {
    const { workflows, crons } = await api('/workflows');
    return [
      el('h2', {}, 'Workflows'),
      el(
        'table',
        { 'data-testid': 'workflows-table' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ['Workflow', 'Queue', 'Versions', 'Max attempts', 'Max concurrency', 'Events', 'Owner'].map((h) => el('th', {}, h)),
          ),
        ),
        el(
          'tbody',
          {},
          workflows.map((w) =>
            el(
              'tr',
              {},
              el('td', {}, el('a', { href: `#/runs?workflow=${encodeURIComponent(w.name)}` }, w.name)),
              el('td', {}, w.queue),
              versionsCell(w),
              el('td', {}, w.maxAttempts),
              el('td', {}, w.maxConcurrency === null ? 'unlimited' : w.maxConcurrency),
              el('td', {}, w.events.join(', ')),
              el('td', {}, w.owner),
            ),
          ),
        ),
      ),
      el('h3', {}, 'Cron schedules'),
      el(
        'table',
        { 'data-testid': 'crons-table' },
        el(
          'thead',
          {},
          el(
            'tr',
            {},
            ['Id', 'Source', 'Workflow', 'Schedule', 'Time zone', 'Next tick'].map((h) => el('th', {}, h)),
          ),
        ),
        // source: "definition" (a workflow's cron trigger) or "runtime" (client.schedule).
        el(
          'tbody',
          {},
          crons.map((c) =>
            el(
              'tr',
              {},
              el('td', {}, c.id),
              el('td', {}, c.source),
              el('td', {}, c.workflow),
              el('td', {}, c.expression !== undefined ? el('code', {}, c.expression) : `every ${interval(c.every)}`),
              el('td', {}, c.timezone || ''),
              el('td', {}, time(c.nextAt)),
            ),
          ),
        ),
      ),
    ];
  }

  // Polling: only while the tab is visible, never for a run that has ended, slower after each
  // failure, and with a notice while Redis is unreachable.
  function schedule(delay) {
    clearTimeout(timer);
    timer = undefined;
    if (delay !== undefined && !document.hidden) timer = setTimeout(render, delay);
  }

  function showNotice(text) {
    notice.textContent = text || '';
    notice.hidden = !text;
  }

  async function render() {
    schedule();
    const current = ++generation;
    const { path, query } = parseHash();
    let live = true;
    try {
      let content;
      if (path === '/') content = await overview();
      else if (path === '/runs') content = await runs(query);
      else if (path.startsWith('/runs/')) {
        content = await runDetail(decodeURIComponent(path.slice('/runs/'.length)));
        live = content.live;
        content = content.nodes;
      } else if (path === '/workflows') content = await workflowsPage();
      else content = [el('p', {}, 'Nothing here.')];
      if (current !== generation) return;
      failures = 0;
      showNotice('');
      // Do not re-render under a filter the user is choosing from.
      if (!(document.activeElement instanceof HTMLSelectElement && view.contains(document.activeElement))) {
        view.replaceChildren(...[content].flat(Infinity).filter(Boolean));
      }
      document.body.dataset.polling = live ? 'on' : 'off';
      schedule(live ? POLL_MS : undefined);
    } catch (error) {
      if (current !== generation) return;
      failures++;
      const delay = Math.min(MAX_BACKOFF_MS, POLL_MS * 2 ** failures);
      if (error.code === 'REDIS_UNAVAILABLE' || error.code === 'REDIS_WRITE_REFUSED') {
        // Keep what is on screen; say why it is not updating.
        showNotice(`${error.message} Retrying in ${Math.round(delay / 1000)} s.`);
      } else if (error.status === undefined || error.status >= 500) {
        showNotice(`The server did not answer (${error.message}). Retrying in ${Math.round(delay / 1000)} s.`);
      } else {
        view.replaceChildren(el('p', { class: 'error', 'data-testid': 'page-error' }, error.message));
      }
      document.body.dataset.polling = 'backoff';
      schedule(delay);
    }
  }

  document.addEventListener('visibilitychange', () => {
    if (document.hidden) schedule();
    else if (document.body.dataset.polling !== 'off') render();
  });

  window.addEventListener('hashchange', () => {
    view.replaceChildren();
    render();
  });
  api('/meta').then(
    (m) => {
      meta = m;
      document.getElementById('meta').textContent = `prefix ${m.prefix}${m.readOnly ? ' · read-only' : ''}`;
      render();
    },
    (error) => view.replaceChildren(el('p', { class: 'error', 'data-testid': 'page-error' }, error.message)),
  );
})();
