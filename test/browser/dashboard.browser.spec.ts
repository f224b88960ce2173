import { existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { createDashboardHandler, NonRetriableError, type CronState } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/** Debian's chromium (`apt-get install -y chromium`); Playwright never downloads a browser here. */
function findChromium(): string | undefined {
  if (existsSync('/usr/bin/chromium')) return '/usr/bin/chromium';
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, 'chromium'))) return join(dir, 'chromium');
  }
  return undefined;
}

const CHROMIUM = findChromium();
if (!CHROMIUM) {
  console.warn('Skipping the dashboard browser test: chromium is missing. Install it with `apt-get install -y chromium` (Debian).');
}
const describeBrowser = CHROMIUM ? describe : describe.skip;

const FLAGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const ARTIFACTS = join(__dirname, '..', '..', 'test-artifacts');
const XSS = '<script>window.__xss=1</script><img src=x onerror="window.__xss=2">';
/** Never ticks while the test runs: midnight, January 1st. */
const NIGHTLY = '0 0 1 1 *';
/** The page polls every 1.5 s: a few polls of patience. */
const UI_TIMEOUT_MS = 6_000;

describeBrowser('dashboard in chromium', () => {
  const gate = deferred();
  let engine: TestEngine;
  let server: Server | undefined;
  let context: BrowserContext | undefined;
  let userDataDir: string | undefined;
  let page: Page;
  let url: string;
  const pageErrors: string[] = [];
  const ids = { greet: '', greetByEvent: '', chargeOk: '', chargeFailed: '', xss: '', blocked: '' };

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
    await engine.worker({ concurrency: 8 });

    ids.greet = (await client.start(greet, { name: 'Ada' })).id;
    [ids.greetByEvent] = await client.emitEvent('user.created', { name: 'Grace' });
    ids.chargeOk = (await client.start(charge, { amount: 10 })).id;
    ids.chargeFailed = (await client.start(charge, { note: 'insufficient funds' })).id;
    ids.xss = (await client.start(charge, { note: XSS })).id;
    ids.blocked = (await client.start(blocked, {})).id;
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

    const handler = createDashboardHandler(client, { path: '/redflow', authorize: () => true, readOnly: false });
    server = createServer((req, res) => {
      handler(req, res).then(
        (handled) => {
          if (!handled) res.writeHead(404).end('not the dashboard');
        },
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    });
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/redflow/`;

    userDataDir = mkdtempSync(join(tmpdir(), 'redflow-chromium-'));
    context = await chromium.launchPersistentContext(userDataDir, { executablePath: CHROMIUM, headless: true, args: FLAGS, viewport: { width: 1280, height: 800 } });
    page = context.pages()[0] ?? (await context.newPage());
    page.setDefaultTimeout(UI_TIMEOUT_MS);
    page.on('pageerror', (error) => pageErrors.push(error.message));
    mkdirSync(ARTIFACTS, { recursive: true });
  }, 30_000);

  afterAll(async () => {
    await context?.close();
    if (server) {
      server.closeAllConnections();
      await new Promise((resolve) => server!.close(resolve));
    }
    gate.resolve();
    await engine?.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true });
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
  const runStatus = () => page.locator('h2 + p').getByTestId('status');

  it('shows the status counts on the overview', async () => {
    await page.goto(url);
    const counts = page.getByTestId('status-counts');
    await counts.waitFor();
    const countOf = (status: string) => counts.locator('a.card', { has: page.locator(`.status-${status}`) }).locator('b').textContent();
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

    const file = join(ARTIFACTS, 'dashboard-runs.png');
    rmSync(file, { force: true });
    await page.screenshot({ path: file, fullPage: true });
    expect(statSync(file).size).toBeGreaterThan(0);
  });

  it('opens a run from the list and shows its input and steps', async () => {
    await openRun(ids.greet);
    expect(await runStatus().textContent()).toBe('succeeded');
    expect(JSON.parse((await page.getByTestId('run-input').textContent()) ?? '')).toEqual({ name: 'Ada' });
    expect(JSON.parse((await page.getByTestId('run-output').textContent()) ?? '')).toBe('Hello Ada');
    const steps = page.getByTestId('steps').getByTestId('step-row');
    await steps.nth(1).waitFor();
    expect(await steps.count()).toBe(2);
    expect(await steps.nth(0).locator('td').nth(1).textContent()).toBe('load-user');
    expect(await steps.nth(1).locator('td').nth(1).textContent()).toBe('compose');
    expect(await steps.getByTestId('status').allTextContents()).toEqual(['succeeded', 'succeeded']);
    expect(await page.getByTestId('cancel').isDisabled()).toBe(true);
    expect(await page.getByTestId('rerun').isDisabled()).toBe(true);

    const file = join(ARTIFACTS, 'dashboard-run.png');
    rmSync(file, { force: true });
    await page.screenshot({ path: file, fullPage: true });
    expect(statSync(file).size).toBeGreaterThan(0);
  });

  it('cancels a running run and shows it canceled without a reload', async () => {
    await openRun(ids.blocked);
    expect(await runStatus().textContent()).toBe('running');
    expect(await page.getByTestId('step-row').locator('td').nth(1).textContent()).toBe('before-gate');
    // A reload would drop this marker.
    await page.evaluate(() => void ((globalThis as Record<string, unknown>).__sameDocument = true));

    await page.getByTestId('cancel').click();
    await runStatus().filter({ hasText: /^canceled$/ }).waitFor();

    expect(await page.evaluate(() => (globalThis as Record<string, unknown>).__sameDocument)).toBe(true);
    expect(await page.getByTestId('action-message').textContent()).toBe('');
    expect(await page.getByTestId('cancel').isDisabled()).toBe(true);
    expect(await page.getByTestId('rerun').isEnabled()).toBe(true);
    expect(await page.getByText('canceled from the dashboard', { exact: true }).count()).toBe(1);
    expect(await engine.client.getRun(ids.blocked)).toMatchObject({ status: 'canceled', cancelReason: 'canceled from the dashboard' });
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
    // Let at least one poll re-render the page before looking for side effects.
    await page.waitForTimeout(1_700);
    expect(await page.locator('#view img, #view script').count()).toBe(0);
    expect(await page.evaluate(() => (globalThis as Record<string, unknown>).__xss)).toBeUndefined();
  });

  it('lists the workflows and the cron schedule with its next tick', async () => {
    await page.getByTestId('nav-workflows').click();
    const workflows = page.getByTestId('workflows-table');
    await workflows.waitFor();
    const rowOf = (name: string) => workflows.locator('tbody tr', { has: page.getByRole('link', { name, exact: true }) });
    expect(await workflows.locator('tbody tr td:first-child').allTextContents()).toEqual(['blocked', 'charge', 'greet', 'nightly']);
    expect(await rowOf('greet').locator('td').nth(4).textContent()).toBe('user.created');
    expect(await rowOf('blocked').locator('td').nth(3).textContent()).toBe('unlimited');
    expect(await rowOf('charge').locator('td').nth(3).textContent()).toBe('1');

    const [cron] = (await engine.client.listCrons()) as [CronState];
    expect(cron).toMatchObject({ id: 'nightly-report', workflow: 'nightly', expression: NIGHTLY });
    expect(cron.nextAt).toBeGreaterThan(Date.now());
    const cells = page.getByTestId('crons-table').locator('tbody tr').locator('td');
    await cells.first().waitFor();
    expect(await cells.allTextContents()).toEqual([
      'nightly-report',
      'nightly',
      NIGHTLY,
      '',
      await page.evaluate((ms) => new Date(ms).toLocaleString(), cron.nextAt!),
    ]);
    expect((await cells.nth(4).textContent())?.trim()).not.toBe('');
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
  });
});
