import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';

import { basicAuth, createDashboardHandler, NonRetriableError, type CronState } from '../../lib';
import { CHROMIUM, describeBrowser, serve, startChromium, type Handler, type TestServer } from '../support/browser';
import { deferred, eventually, TestEngine } from '../support/engine';

const ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts');
const XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">';
/** Never ticks while the test runs: midnight, January 1st. */
const NIGHTLY = '0 0 1 1 *';
/** The page's poll period, read from the page itself so the waits below follow it. */
const POLL_MS = Number(/export const POLL_MS = (\d+);/.exec(readFileSync(join(__dirname, '..', '..', 'lib', 'dashboard', 'ui', 'poller.ts'), 'utf8'))?.[1]);
/** A few polls of patience. */
const UI_TIMEOUT_MS = 6_000;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the page functions below read of `document` (this project's TypeScript has no DOM library). */
type PageGlobals = { document: { visibilityState: string; body: { dataset: Record<string, string | undefined> }; querySelector(selector: string): unknown } };
const visibilityOf = (target: Page) => target.evaluate(() => (globalThis as unknown as PageGlobals).document.visibilityState);
/** `body.dataset.polling`: `on`, `off` (an ended run) or `backoff` (after a failure). */
const pollingOf = (target: Page) => target.evaluate(() => (globalThis as unknown as PageGlobals).document.body.dataset.polling);
const waitForPolling = (target: Page, value: 'on' | 'off' | 'backoff', timeout = UI_TIMEOUT_MS) =>
  target.waitForFunction((want) => (globalThis as unknown as PageGlobals).document.body.dataset.polling === want, value, { polling: 50, timeout });

describeBrowser('dashboard in chromium', () => {
  const gate = deferred();
  let engine: TestEngine;
  let main: TestServer;
  let browser: Browser | undefined;
  let chromiumProcess: ChildProcess | undefined;
  let context: BrowserContext | undefined;
  let userDataDir: string | undefined;
  let page: Page;
  let url: string;
  let handler: Handler;
  let startBlocked: () => Promise<string>;
  let startCharge: (input: unknown) => Promise<string>;
  const pageErrors: string[] = [];
  /** The messages of the confirmations the pages asked for (each accepted), in order. */
  const dialogs: string[] = [];
  const ids = { greet: '', greetByEvent: '', chargeOk: '', chargeFailed: '', xss: '', blocked: '' };

  /** A new page of `target`, with its script errors collected for the check after each test. */
  async function newPage(target: BrowserContext): Promise<Page> {
    const created = await target.newPage();
    created.setDefaultTimeout(UI_TIMEOUT_MS);
    created.on('pageerror', (error) => pageErrors.push(error.message));
    created.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.accept();
    });
    return created;
  }

  /** Waits until `id` is running and has recorded its first step. */
  async function waitUntilBlocked(id: string): Promise<void> {
    await eventually(async () => (await engine.client.getRun(id))?.status === 'running' && (await engine.client.getRunSteps(id)).length === 1, 10_000);
  }

  beforeAll(async () => {
    engine = new TestEngine();
    const { registry, client } = engine;
    const greet = registry.define('greet', { event: [{ name: 'user.created' }] }, async ({ input, step }) => {
      const user = await step.run('load-user', () => ({ name: (input as { name: string }).name }));
      return step.run('compose', () => `Hello ${user.name}`);
    });
    const charge = registry.define('charge', {}, ({ input }) => {
      const note = (input as { note?: string }).note;
      if (note !== undefined) throw new NonRetriableError(`card declined: ${note}`);
      return { charged: true };
    });
    registry.define('nightly', { cron: [{ id: 'nightly-report', expression: NIGHTLY }] }, () => 'report');
    const blocked = registry.define('blocked', { maxConcurrency: Infinity }, async ({ step }) => {
      await step.run('before-gate', () => 'ok');
      await gate.promise;
      return 'released';
    });
    startBlocked = async () => (await client.start(blocked, {})).id;
    startCharge = async (input) => (await client.start(charge, input as { note?: string })).id;
    await engine.worker({ concurrency: 8 });
    // A runtime schedule beside the workflow's own cron; its first tick is days away.
    await client.schedule('reports-every-30d', { workflow: 'nightly', every: '30d' });

    ids.greet = (await client.start(greet, { name: 'Ada' })).id;
    [ids.greetByEvent] = await client.emitEvent('user.created', { name: 'Grace' });
    ids.chargeOk = (await client.start(charge, { amount: 10 })).id;
    ids.chargeFailed = (await client.start(charge, { note: 'insufficient funds' })).id;
    ids.xss = (await client.start(charge, { note: XSS })).id;
    ids.blocked = await startBlocked();
    const expected: Record<string, string> = {
      [ids.greet]: 'succeeded',
      [ids.greetByEvent]: 'succeeded',
      [ids.chargeOk]: 'succeeded',
      [ids.chargeFailed]: 'failed',
      [ids.xss]: 'failed',
      [ids.blocked]: 'running',
    };
    await eventually(async () => {
      for (const [id, status] of Object.entries(expected)) if ((await client.getRun(id))?.status !== status) return false;
      return (await client.getRunSteps(ids.blocked)).length === 1;
    }, 10_000);

    handler = createDashboardHandler(client, { path: '/redflow', authorize: () => true, readOnly: false });
    main = await serve(handler);
    url = `${main.origin}/redflow/`;

    userDataDir = mkdtempSync(join(tmpdir(), 'redflow-chromium-'));
    ({ browser, process: chromiumProcess } = await startChromium(CHROMIUM!, userDataDir));
    context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    page = await newPage(context);
    mkdirSync(ARTIFACTS, { recursive: true });
  }, 30_000);

  afterAll(async () => {
    await browser?.close();
    if (chromiumProcess && chromiumProcess.exitCode === null && chromiumProcess.signalCode === null) {
      const exited = new Promise((resolve) => chromiumProcess!.once('exit', resolve));
      process.kill(-chromiumProcess.pid!, 'SIGTERM'); // the group: /usr/bin/chromium is a wrapper script
      await exited;
    }
    await main?.close();
    gate.resolve();
    await engine?.close();
    // Chromium's helper processes may still be writing its profile for a moment after it exits.
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }, 20_000);

  afterEach(() => {
    expect(pageErrors).toEqual([]);
  });

  /** The run ids of the rows of the runs table, in order. */
  async function rowIds(): Promise<string[]> {
    const rows = await page.getByTestId('run-row').all();
    return Promise.all(rows.map(async (row) => (await row.getAttribute('data-run-id')) ?? ''));
  }

  /** Waits until the runs table shows exactly `expected` (in any order); returns what it shows. */
  async function waitForRows(expected: string[]): Promise<string[]> {
    const want = [...expected].sort();
    let shown: string[] = [];
    await eventually(async () => {
      shown = (await rowIds()).sort();
      return JSON.stringify(shown) === JSON.stringify(want);
    }, UI_TIMEOUT_MS).catch(() => undefined);
    return shown;
  }

  async function openRun(id: string): Promise<void> {
    await page.getByTestId('nav-runs').click();
    await page.getByTestId('run-row').first().waitFor();
    await page.locator(`[data-testid="run-row"][data-run-id="${id}"]`).getByTestId('run-link').click();
    await page.getByTestId('run-id').filter({ hasText: id }).waitFor();
    expect(page.url()).toBe(`${url}#/runs/${encodeURIComponent(id)}`);
  }

  /** The status badge of the run detail page (the first one: step rows have their own). */
  const runStatus = (target = page) => target.getByTestId('run-status').getByTestId('status');
  /** The step names of the run detail page: the first text of each row's name cell (its output preview follows). */
  const stepNames = () =>
    page
      .getByTestId('steps')
      .getByTestId('step-row')
      .evaluateAll((rows) => rows.map((row) => row.querySelectorAll('td')[1]?.firstChild?.textContent ?? ''));
  /** How many times `server` was asked for the detail of run `id`. */
  const detailHits = (server: TestServer, id: string) => server.hits.filter((h) => h.route === '/api/run' && h.query.get('id') === id).length;

  it('serves the page at /redflow and /redflow/ without a redirect', async () => {
    for (const address of [`${main.origin}/redflow`, url]) {
      const response = await page.goto(address);
      expect(response?.status()).toBe(200);
      expect(response?.request().redirectedFrom()).toBeNull();
      expect(page.url()).toBe(address);
      expect(await page.locator('meta[name="redflow-csrf"]').getAttribute('content')).toMatch(/^[\w-]+\.[\w-]+\.[\w-]+$/);
      await page.getByTestId('status-counts').waitFor();
    }
  });

  it('shows the status counts on the overview', async () => {
    await page.goto(url);
    const counts = page.getByTestId('status-counts');
    await counts.waitFor();
    const countOf = (status: string) =>
      counts
        .locator('a.card', { has: page.locator(`.status-${status}`) })
        .locator('b')
        .textContent();
    const shown: Record<string, string | null> = {};
    for (const status of ['scheduled', 'queued', 'running', 'succeeded', 'failed', 'canceled']) shown[status] = await countOf(status);
    expect(shown).toEqual({ scheduled: '0', queued: '0', running: '1', succeeded: '3', failed: '2', canceled: '0' });
  });

  it('filters the runs by workflow and status', async () => {
    await page.getByTestId('nav-runs').click();
    expect(await waitForRows(Object.values(ids))).toEqual([...Object.values(ids)].sort());
    expect(await page.getByTestId('page-prev').isDisabled()).toBe(true);
    expect(await page.getByTestId('page-next').isDisabled()).toBe(true);

    await page.getByTestId('filter-workflow').selectOption('charge');
    expect(await waitForRows([ids.chargeOk, ids.chargeFailed, ids.xss])).toEqual([ids.chargeOk, ids.chargeFailed, ids.xss].sort());
    expect(await page.getByTestId('filter-workflow').inputValue()).toBe('charge');

    await page.getByTestId('filter-status').selectOption('failed');
    expect(await waitForRows([ids.chargeFailed, ids.xss])).toEqual([ids.chargeFailed, ids.xss].sort());
    expect(new URL(page.url()).hash).toBe('#/runs?workflow=charge&status=failed');
    expect(await page.getByTestId('filter-workflow').inputValue()).toBe('charge');
    expect(await page.getByTestId('filter-status').inputValue()).toBe('failed');
    expect(await page.getByTestId('runs-table').getByTestId('status').allTextContents()).toEqual(['failed', 'failed']);

    await page.getByTestId('filter-workflow').selectOption('greet');
    expect(await waitForRows([])).toEqual([]);
    await page.getByText('No runs match.').waitFor();

    await page.getByTestId('filter-status').selectOption('succeeded');
    expect(await waitForRows([ids.greet, ids.greetByEvent])).toEqual([ids.greet, ids.greetByEvent].sort());

    await page.getByTestId('filter-workflow').selectOption('');
    await page.getByTestId('filter-status').selectOption('');
    expect(await waitForRows(Object.values(ids))).toEqual([...Object.values(ids)].sort());

    // The list asks for summaries with the filters as query parameters.
    const lists = main.hits.filter((h) => h.route === '/api/runs').map((h) => Object.fromEntries(h.query));
    expect(lists).toContainEqual({ limit: '25', workflow: 'charge', status: 'failed' });
    expect(lists).toContainEqual({ limit: '25', workflow: 'greet', status: 'succeeded' });

    const file = join(ARTIFACTS, 'dashboard-runs.png');
    rmSync(file, { force: true });
    await page.screenshot({ path: file, fullPage: true });
    expect(statSync(file).size).toBeGreaterThan(0);
  });

  it('opens a run from the list and shows its input, output and steps', async () => {
    await openRun(ids.greet);
    expect(await runStatus().textContent()).toBe('succeeded');
    expect(JSON.parse((await page.getByTestId('run-input').textContent()) ?? '')).toEqual({ name: 'Ada' });
    expect(JSON.parse((await page.getByTestId('run-output').textContent()) ?? '')).toBe('Hello Ada');
    // Small payloads are shown whole: no "first 64 KiB" note.
    expect(await page.getByTestId('run-input-truncated').count()).toBe(0);
    expect(await page.getByTestId('run-output-truncated').count()).toBe(0);
    const steps = page.getByTestId('steps').getByTestId('step-row');
    await steps.nth(1).waitFor();
    expect(await steps.count()).toBe(2);
    expect(await stepNames()).toEqual(['load-user', 'compose']);
    expect(await steps.getByTestId('status').allTextContents()).toEqual(['succeeded', 'succeeded']);
    expect((await steps.getByTestId('step-output').allTextContents()).map((text) => JSON.parse(text) as unknown)).toEqual([{ name: 'Ada' }, 'Hello Ada']);
    expect(await page.getByTestId('cancel').isDisabled()).toBe(true);
    expect(await page.getByTestId('rerun').isDisabled()).toBe(true);
    expect(await page.getByTestId('resume').isDisabled()).toBe(true);

    const file = join(ARTIFACTS, 'dashboard-run.png');
    rmSync(file, { force: true });
    await page.screenshot({ path: file, fullPage: true });
    expect(statSync(file).size).toBeGreaterThan(0);
  });

  it('cancels a running run and shows it canceled without a reload', async () => {
    await openRun(ids.blocked);
    expect(await runStatus().textContent()).toBe('running');
    expect(await stepNames()).toEqual(['before-gate']);
    // A reload would drop this marker.
    await page.evaluate(() => void ((globalThis as Record<string, unknown>).__sameDocument = true));

    dialogs.length = 0;
    await page.getByTestId('cancel').click();
    await runStatus()
      .filter({ hasText: /^canceled$/ })
      .waitFor();
    expect(dialogs).toEqual([`Cancel run ${ids.blocked}?`]);

    expect(await page.evaluate(() => (globalThis as Record<string, unknown>).__sameDocument)).toBe(true);
    expect(await page.getByTestId('action-message').textContent()).toBe('');
    expect(await page.getByTestId('cancel').isDisabled()).toBe(true);
    expect(await page.getByTestId('rerun').isEnabled()).toBe(true);
    expect(await page.getByTestId('resume').isEnabled()).toBe(true);
    expect(await page.getByText('canceled from the dashboard', { exact: true }).count()).toBe(1);
    expect(await engine.client.getRun(ids.blocked)).toMatchObject({ status: 'canceled', cancelReason: 'canceled from the dashboard' });
    // The action went out as the server demands: JSON, with the page's token (the server refuses anything else).
    expect(main.hits.filter((h) => h.route === '/api/run/cancel').map((h) => [h.method, h.query.get('id'), h.status])).toEqual([['POST', ids.blocked, 200]]);
  });

  it('terminates a running run and then deletes it, each after a confirmation', async () => {
    const id = await startBlocked();
    await waitUntilBlocked(id);
    await openRun(id);
    expect(await page.getByTestId('terminate').isEnabled()).toBe(true);
    dialogs.length = 0;
    {
      await page.getByTestId('terminate').click();
      await runStatus()
        .filter({ hasText: /^terminated$/ })
        .waitFor();
      expect(await page.getByTestId('terminate').isDisabled()).toBe(true);
      expect(await page.getByTestId('resume').isEnabled()).toBe(true);
      expect(await engine.client.getRun(id)).toMatchObject({ status: 'terminated', cancelReason: 'terminated from the dashboard' });

      await page.getByTestId('delete').click();
      await eventually(() => page.url() === `${url}#/runs`, UI_TIMEOUT_MS);
      expect(await engine.client.getRun(id)).toBeNull();
    }
    expect(dialogs).toEqual([`Terminate run ${id} now, without cleanup?`, `Delete run ${id} and its steps?`]);
    expect(
      main.hits.filter((h) => h.route === '/api/run/terminate' || h.route === '/api/run/delete').map((h) => [h.route, h.query.get('id'), h.status]),
    ).toEqual([
      ['/api/run/terminate', id, 200],
      ['/api/run/delete', id, 200],
    ]);
  });

  it('renders a run input and error holding markup as literal text', async () => {
    await openRun(ids.xss);
    expect(await runStatus().textContent()).toBe('failed');
    const input = page.getByTestId('run-input');
    const error = page.getByTestId('run-error');
    await error.waitFor();
    expect(JSON.parse((await input.textContent()) ?? '')).toEqual({ note: XSS });
    for (const block of [input, error]) {
      const text = (await block.textContent()) ?? '';
      expect(text).toContain('<script>');
      expect(text).toContain('<img');
      expect(await block.locator('img, script').count()).toBe(0);
    }
    expect(await error.textContent()).toContain(`NonRetriableError: card declined: ${XSS}`);
    expect(await page.locator('#main img, #main script').count()).toBe(0);

    // The detail of an ended run is not polled again; the runs list, which shows the error too, re-renders
    // on every poll: wait for one re-render there before looking for side effects.
    await page.goto(`${url}#/runs?workflow=charge&status=failed`);
    const row = page.locator(`[data-testid="run-row"][data-run-id="${ids.xss}"]`);
    await row.waitFor();
    expect(await row.locator('td.error').textContent()).toBe(`NonRetriableError: card declined: ${XSS}`);
    const polls = main.hits.filter((h) => h.route === '/api/runs').length;
    await eventually(() => main.hits.filter((h) => h.route === '/api/runs' && h.status === 200).length > polls, UI_TIMEOUT_MS);
    await sleep(100); // the answer drawn
    await row.waitFor();
    expect(await page.locator('#main img, #main script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as Record<string, unknown>).__xss)).toBeUndefined();
  });

  it('lists the workflows, and the cron trigger and the runtime schedule with their next tick', async () => {
    await page.getByTestId('nav-workflows').click();
    const workflows = page.getByTestId('workflows-table');
    await workflows.waitFor();
    const rowOf = (name: string) => workflows.locator('tbody tr', { has: page.getByRole('link', { name, exact: true }) });
    expect(await workflows.locator('tbody tr td:first-child').allTextContents()).toEqual(['blocked', 'charge', 'greet', 'nightly']);
    // Columns: workflow, queue, versions, max attempts, max concurrency, events, owner.
    expect(await rowOf('greet').locator('td').nth(5).textContent()).toBe('user.created');
    expect(await rowOf('blocked').locator('td').nth(4).textContent()).toBe('unlimited');
    expect(await rowOf('charge').locator('td').nth(4).textContent()).toBe('unlimited'); // no limit by default
    expect(await rowOf('charge').locator('td').nth(2).textContent()).toContain('v1');

    const [cron, schedule] = (await engine.client.listCrons()) as [CronState, CronState];
    expect(cron).toMatchObject({ id: 'nightly-report', source: 'definition', workflow: 'nightly', expression: NIGHTLY });
    expect(schedule).toMatchObject({ id: 'reports-every-30d', source: 'runtime', workflow: 'nightly', every: 30 * 86_400_000 });
    expect(cron.nextAt).toBeGreaterThan(Date.now());
    const rows = page.getByTestId('crons-table').locator('tbody tr');
    await rows.first().waitFor();
    // The page writes times as YYYY-MM-DD HH:MM:SS in the browser's zone.
    const localTime = (ms: number) =>
      page.evaluate((at) => {
        const d = new Date(at);
        const p = (n: number) => String(n).padStart(2, '0');
        return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
      }, ms);
    expect(await rows.nth(0).locator('td').allTextContents()).toEqual(['nightly-report', 'definition', 'nightly', NIGHTLY, '', await localTime(cron.nextAt!)]);
    expect(await rows.nth(1).locator('td').allTextContents()).toEqual([
      'reports-every-30d',
      'runtime',
      'nightly',
      'every 30d',
      '',
      await localTime(schedule.nextAt!),
    ]);
    expect((await rows.nth(0).locator('td').nth(5).textContent())?.trim()).not.toBe('');
    expect(await page.getByTestId('page-error').count()).toBe(0);
  });

  it('shows a run started elsewhere on the open list, by polling', async () => {
    await page.getByTestId('nav-runs').click();
    await page.getByTestId('filter-workflow').selectOption('greet');
    expect(await waitForRows([ids.greet, ids.greetByEvent])).toEqual([ids.greet, ids.greetByEvent].sort());
    await page.evaluate(() => void ((globalThis as Record<string, unknown>).__sameDocument = 'list'));

    const [later] = await engine.client.emitEvent('user.created', { name: 'Linus' });
    await page.locator(`[data-testid="run-row"][data-run-id="${later}"]`).waitFor();
    expect(await waitForRows([ids.greet, ids.greetByEvent, later])).toEqual([ids.greet, ids.greetByEvent, later].sort());
    expect(await page.evaluate(() => (globalThis as Record<string, unknown>).__sameDocument)).toBe('list');

    // Each poll reads the list; the workflow filter's choices are read at most once a minute.
    const count = (route: string) => main.hits.filter((h) => h.route === route).length;
    const [lists, workflows] = [count('/api/runs'), count('/api/workflows')];
    await eventually(() => count('/api/runs') >= lists + 4, UI_TIMEOUT_MS);
    expect(count('/api/workflows') - workflows).toBeLessThanOrEqual(1);
  });

  it('shows the first 64 KiB of a large input and downloads the whole of it', async () => {
    const input = { blob: 'x'.repeat(80 * 1024) };
    const id = await startCharge(input);
    await eventually(async () => (await engine.client.getRun(id))?.status === 'succeeded');
    await page.goto(`${url}#/runs/${encodeURIComponent(id)}`);
    const note = page.getByTestId('run-input-truncated');
    await note.waitFor();
    const whole = JSON.stringify(input, null, 2);
    expect(await note.textContent()).toBe(`Showing the first 64 KiB of ${Math.ceil(Buffer.byteLength(whole) / 1024)} KiB. Show all (download)`);
    expect(await page.getByTestId('run-input').textContent()).toBe(whole.slice(0, 64 * 1024));

    const link = note.getByRole('link', { name: 'Show all (download)' });
    expect(await link.getAttribute('href')).toBe(`/redflow/api/run/payload?id=${encodeURIComponent(id)}&field=input`);
    const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
    expect(download.suggestedFilename()).toBe(`${id}-input.json`);
    const chunks: Buffer[] = [];
    for await (const chunk of (await download.createReadStream()) as AsyncIterable<Buffer>) chunks.push(chunk);
    expect(JSON.parse(Buffer.concat(chunks).toString('utf8'))).toEqual(input);
  });

  it('stops polling on the detail of a run that has ended', async () => {
    expect(POLL_MS).toBeGreaterThan(0);
    await openRun(ids.greet);
    await waitForPolling(page, 'off');
    const asked = detailHits(main, ids.greet);
    const all = main.hits.length;
    expect(asked).toBeGreaterThanOrEqual(1);

    await sleep(2 * POLL_MS + 200);
    expect(detailHits(main, ids.greet)).toBe(asked);
    expect(main.hits.length).toBe(all);
    expect(await pollingOf(page)).toBe('off');
  });

  it('keeps polling a live run until it ends elsewhere, then stops', async () => {
    const id = await startBlocked();
    await waitUntilBlocked(id);
    await openRun(id);
    await waitForPolling(page, 'on');
    const first = detailHits(main, id);
    // Two more polls of the open run.
    await eventually(() => detailHits(main, id) >= first + 2, 2 * POLL_MS + 2_000);

    await engine.client.cancelRun(id, { reason: 'canceled elsewhere' });
    await runStatus()
      .filter({ hasText: /^canceled$/ })
      .waitFor();
    await waitForPolling(page, 'off');
    expect(await page.getByText('canceled elsewhere', { exact: true }).count()).toBe(1);
    const asked = detailHits(main, id);
    await sleep(2 * POLL_MS + 200);
    expect(detailHits(main, id)).toBe(asked);
  });

  it('stops polling while the tab is hidden and resumes when it is shown again', async () => {
    // Pages of the default context have no focus emulation (see startChromium): tabs really hide.
    const tabs = browser!.contexts()[0];
    const own = await serve(handler);
    const watched = await newPage(tabs);
    const other = await newPage(tabs);
    try {
      const overviews = () => own.hits.filter((h) => h.route === '/api/overview').length;
      await watched.bringToFront();
      await watched.goto(`${own.origin}/redflow/`);
      await watched.getByTestId('status-counts').waitFor();
      expect(await visibilityOf(watched)).toBe('visible');
      // Hide it right after a poll was answered, so that no request is on its way.
      await watched.waitForResponse((response) => response.url().endsWith('/api/overview'), { timeout: 2 * POLL_MS + 2_000 });
      await other.bringToFront();
      await eventually(async () => (await visibilityOf(watched)) === 'hidden', 2_000);
      const before = overviews();
      const all = own.hits.length;

      await sleep(2 * POLL_MS + 200);
      expect(overviews()).toBe(before);
      expect(own.hits.length).toBe(all);

      await watched.bringToFront();
      expect(await visibilityOf(watched)).toBe('visible');
      // Shown again: one render at once, then the usual polls.
      await eventually(() => overviews() > before, POLL_MS);
      await eventually(() => overviews() >= before + 2, 2 * POLL_MS + 1_000);
      expect(await pollingOf(watched)).toBe('on');
    } finally {
      await watched.close();
      await other.close();
      await own.close();
    }
  });

  it('shows a notice and backs off while the server answers 503, and recovers', async () => {
    await page.goto(url);
    await page.getByTestId('status-counts').waitFor();
    await waitForPolling(page, 'on');
    const notice = page.getByTestId('notice');
    expect(await notice.isHidden()).toBe(true);

    const message = `Redis at ${new URL(process.env.REDFLOW_TEST_REDIS_URL!).host} is unreachable; the dashboard shows data again when it is back.`;
    const from = main.hits.length;
    main.outage = { status: 503, body: { statusCode: 503, code: 'REDIS_UNAVAILABLE', message } };
    try {
      await notice.waitFor({ state: 'visible', timeout: POLL_MS + 2_000 });
      expect(await notice.textContent()).toBe(`${message} Retrying in ${Math.round((2 * POLL_MS) / 1000)} s.`);
      expect(await pollingOf(page)).toBe('backoff');
      // What was on screen stays there.
      expect(await page.getByTestId('status-counts').isVisible()).toBe(true);
    } finally {
      main.outage = undefined;
    }
    const failed = main.hits.slice(from).filter((h) => h.status === 503);
    expect(failed.map((h) => h.route)).toEqual(['/api/overview']);

    // The retry comes after the backoff (twice the poll period), not at the next poll.
    await notice.waitFor({ state: 'hidden', timeout: 2 * POLL_MS + 3_000 });
    await waitForPolling(page, 'on');
    const retry = main.hits.slice(from).find((h) => h.status === 200)!;
    expect(retry.route).toBe('/api/overview');
    expect(retry.at - failed[0].at).toBeGreaterThanOrEqual(2 * POLL_MS - 100);
    expect(await page.getByTestId('status-counts').isVisible()).toBe(true);
  });

  it("shows a run's progress and pending event wait, and resumes a failed run in place", async () => {
    const { registry, client } = engine;
    const approval = registry.define('approval', {}, async ({ step, input }) => {
      await step.setProgress({ done: 1, of: 2 });
      return step.waitForEvent('paid', 'order.paid', { match: { orderId: (input as { orderId: string }).orderId }, timeout: '1h' });
    });
    let failOnce = true;
    let firstRuns = 0;
    const resumable = registry.define('resumable', {}, async ({ step }) => {
      await step.run('first', () => ++firstRuns);
      return step.run('second', () => {
        if (failOnce) {
          failOnce = false;
          throw new NonRetriableError('not yet');
        }
        return 'done';
      });
    });
    const waiting = (await client.start(approval, { orderId: 'o-42' })).id;
    const failed = (await client.start(resumable, {})).id;
    await eventually(async () => (await client.getRun(waiting))?.status === 'scheduled' && (await client.getRun(failed))?.status === 'failed', 10_000);

    await page.goto(url);
    await openRun(waiting);
    await page.getByTestId('run-progress').waitFor();
    expect(await page.getByTestId('run-progress').textContent()).toContain('"of": 2');
    const wait = page.getByTestId('step-wait');
    expect(await wait.textContent()).toMatch(/^event "order\.paid" matching \{"orderId":"o-42"\} until /);

    await openRun(failed);
    expect(await runStatus().textContent()).toBe('failed');
    await page.getByTestId('resume').click();
    await runStatus()
      .filter({ hasText: /^succeeded$/ })
      .waitFor();
    expect(await stepNames()).toEqual(['first', 'second']);
    expect(firstRuns).toBe(1); // the step that had succeeded was not run again
    expect(await client.getRun(failed)).toMatchObject({ status: 'succeeded', output: 'done' });
    expect(main.hits.filter((h) => h.route === '/api/run/resume').map((h) => [h.method, h.query.get('id'), h.status])).toEqual([['POST', failed, 200]]);
  });

  it('asks for Basic credentials, and works with them, cancel included', async () => {
    const client = engine.client;
    const secured = await serve(createDashboardHandler(client, { path: '/redflow', authorize: basicAuth({ username: 'ops', password: 's3cret' }) }));
    const securedUrl = `${secured.origin}/redflow/`;
    const contexts: BrowserContext[] = [];
    try {
      // Without credentials: a 401 with a Basic challenge. Headless chromium has no sign-in prompt
      // and ends that navigation with ERR_INVALID_AUTH_CREDENTIALS; the response itself is the 401.
      const anonymous = await browser!.newContext();
      contexts.push(anonymous);
      const stranger = await newPage(anonymous);
      const challenged = stranger.waitForResponse(securedUrl);
      const outcome = await stranger.goto(securedUrl).then(
        (response) => response?.status(),
        (error: Error) => error.message,
      );
      const challenge = await challenged;
      expect(challenge.status()).toBe(401);
      expect(challenge.headers()['www-authenticate']).toBe('Basic realm="Redflow", charset="UTF-8"');
      expect(String(outcome)).toMatch(/^401$|ERR_INVALID_AUTH_CREDENTIALS/);
      const asked = secured.requests.filter((r) => r.path.startsWith('/redflow'));
      expect(asked.length).toBeGreaterThan(0);
      expect(asked.every((r) => r.status === 401 && r.authorization === undefined)).toBe(true);

      // A wrong password: Playwright answers the challenge once, then chromium shows the 401.
      const wrong = await browser!.newContext({ httpCredentials: { username: 'ops', password: 'wrong' } });
      contexts.push(wrong);
      const intruder = await newPage(wrong);
      const refused = await intruder.goto(securedUrl);
      expect(refused?.status()).toBe(401);
      expect(await refused?.json()).toEqual({ statusCode: 401, code: 'UNAUTHORIZED', message: 'Sign in to use the dashboard.' });
      expect(await intruder.getByTestId('runs-table').count()).toBe(0);

      // The right credentials: the page, its API calls and an action all go through.
      const id = await startBlocked();
      await waitUntilBlocked(id);
      const signedIn = await browser!.newContext({ httpCredentials: { username: 'ops', password: 's3cret' } });
      contexts.push(signedIn);
      const ops = await newPage(signedIn);
      const opened = await ops.goto(`${securedUrl}#/runs`);
      expect(opened?.status()).toBe(200);
      await ops.getByTestId('runs-table').waitFor();
      const row = ops.locator(`[data-testid="run-row"][data-run-id="${id}"]`);
      await row.waitFor();
      await row.getByTestId('run-link').click();
      await runStatus(ops)
        .filter({ hasText: /^running$/ })
        .waitFor();
      await ops.getByTestId('cancel').click();
      await runStatus(ops)
        .filter({ hasText: /^canceled$/ })
        .waitFor();
      expect(await ops.getByTestId('action-message').textContent()).toBe('');
      expect(await client.getRun(id)).toMatchObject({ status: 'canceled', cancelReason: 'canceled from the dashboard' });

      const basic = `Basic ${Buffer.from('ops:s3cret').toString('base64')}`;
      const cancels = secured.hits.filter((h) => h.route === '/api/run/cancel');
      expect(cancels.map((h) => [h.method, h.query.get('id'), h.authorization, h.status])).toEqual([['POST', id, basic, 200]]);
      // Only the signed-in page reached the API, and the browser sent the credentials with every call.
      expect(secured.hits.length).toBeGreaterThan(2);
      expect(secured.hits.filter((h) => h.authorization !== basic || h.status !== 200).map((h) => [h.route, h.status])).toEqual([]);
    } finally {
      for (const opened of contexts) await opened.close();
      await secured.close();
    }
  });
});
