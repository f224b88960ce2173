import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';

import { createDashboardHandler, createQueues, createSchedules, NonRetriableError, WorkflowRegistry } from '../../lib';
import { CHROMIUM, describeBrowser, serve, startChromium, type TestServer } from '../support/browser';
import { eventually, TestEngine } from '../support/engine';

/**
 * The operator's dashboard in chromium, on a real app and a real Redis: the run page's timeline
 * and step I/O, finding runs (what they wait for, id, idempotency key), actions (signal, bulk
 * resume), live updates that keep the place, accessibility (axe-core, light and dark, empty
 * states) and a 360 px screen.
 */
const UI_TIMEOUT_MS = 8_000;
const AXE = readFileSync(require.resolve('axe-core/axe.min.js'), 'utf8');
const PAGES = ['#/', '#/runs', '#/queues', '#/workers', '#/versions', '#/schedules', '#/workflows'];

/** What the page functions below read of the browser (this project's TypeScript has no DOM library). */
type Win = {
  document: {
    activeElement: { closest(s: string): { getAttribute(n: string): string | null } | null; getAttribute(n: string): string | null } | null;
    documentElement: { scrollWidth: number; clientWidth: number };
  };
  scrollY: number;
  scrollTo(x: number, y: number): void;
  axe: {
    run(context: unknown, options: unknown): Promise<{ violations: Array<{ id: string; impact: string; help: string; nodes: Array<{ target: string[] }> }> }>;
  };
};

describeBrowser('the operator UI in chromium', () => {
  let engine: TestEngine;
  let empty: TestEngine;
  let main: TestServer;
  let bare: TestServer;
  let browser: Browser | undefined;
  let chromiumProcess: ChildProcess | undefined;
  let userDataDir: string | undefined;
  let context: BrowserContext;
  let page: Page;
  let url: string;
  const pageErrors: string[] = [];
  const dialogs: string[] = [];
  let importsFixed = false;
  let declines = 0;
  const ids = { shipped: '', awaiting: [] as string[], compensated: '', keyed: '', imports: [] as string[] };

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

  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;

  beforeAll(async () => {
    engine = new TestEngine();
    empty = new TestEngine();
    const { registry, client } = engine;
    const notify = registry.define('notify', { queue: 'mail' }, async ({ step }) => {
      await step.sleep('throttle', '120ms');
      return step.run('send', () => ({ sent: true }));
    });
    const checkout = registry.define('checkout', { maxConcurrency: Infinity }, async ({ input, step }) => {
      const { order, amount } = input as { order: string; amount: number };
      await step.run({ name: 'reserve-stock', compensate: () => 'released' }, () => ({ order, reserved: 3 }));
      await step.run({ name: 'charge-card', retries: { maxAttempts: 3, delay: '80ms', backoff: 'fixed' } }, () => {
        if (order.endsWith('-flaky') && declines++ % 3 < 2) throw new Error(`card network timeout ${declines}`);
        if (amount > 1000) throw new NonRetriableError(`amount ${amount} is over the limit`);
        return { charged: amount };
      });
      await step.sleep('cool-off', '150ms');
      const approval = await step.waitForSignal('approval', 'approve', { timeout: '1h' });
      await step.runWorkflow('notify-customer', notify, { order });
      return { order, approvedBy: approval };
    });
    const imports = registry.define('import-batch', { maxConcurrency: Infinity }, async ({ input, step }) =>
      step.run('load', () => {
        if (!importsFixed) throw new NonRetriableError('the import source is down');
        return { imported: (input as { n: number }).n };
      }),
    );
    await engine.worker({ concurrency: 50 });
    await client.schedule('nightly-mail', { workflow: 'notify', cron: '0 3 * * *', input: { order: 'digest' } });

    ids.shipped = (await client.start(checkout, { order: 'A-1-flaky', amount: 42 })).id;
    for (let i = 0; i < 3; i++) ids.awaiting.push((await client.start(checkout, { order: `A-2${i}`, amount: 10 + i })).id);
    ids.compensated = (await client.start(checkout, { order: 'A-3', amount: 5000 })).id;
    ids.keyed = (await client.start(checkout, { order: 'A-4', amount: 7 }, { idempotencyKey: 'order-A-4' })).id;
    for (let i = 0; i < 200; i++) ids.imports.push((await client.start(imports, { n: i })).id);

    const waitsForApproval = async (id: string) => (await client.getRunSteps(id)).some((s) => s.status === 'waiting' && s.signal === 'approve');
    await eventually(async () => (await Promise.all([ids.shipped, ids.keyed, ...ids.awaiting].map(waitsForApproval))).every(Boolean), 15_000);
    await client.signal(ids.shipped, 'approve', { by: 'ops@example.com' });
    await eventually(async () => (await statusOf(ids.shipped)) === 'succeeded' && (await statusOf(ids.compensated)) === 'failed', 15_000);
    await eventually(async () => (await client.countRuns({ workflow: 'import-batch', status: 'failed' })) === 200, 15_000);

    // billing v1 has a run waiting, and only a v2 worker is left: "no worker for billing v1". Its
    // workers are another app's (an app's registry is its own: a worker syncs it, pruning the rest).
    const billing = (version: number) => {
      const r = new WorkflowRegistry();
      r.define('billing', { version, queue: 'billing' }, async ({ step }) => step.waitForSignal('go', 'go'));
      return r;
    };
    const v1 = await engine.worker({ app: 'billing-service', registry: billing(1) });
    const bill = await client.runByName('billing', {});
    await eventually(async () => (await statusOf(bill.id)) === 'scheduled', 10_000);
    await engine.worker({ app: 'billing-service', registry: billing(2) });
    await v1.stop();

    main = await serve(createDashboardHandler(client, { path: '/redflow', authorize: () => true, readOnly: false }));
    bare = await serve(createDashboardHandler(empty.client, { path: '/redflow', authorize: () => true, readOnly: true }));
    url = `${main.origin}/redflow/`;
    userDataDir = mkdtempSync(join(tmpdir(), 'redflow-chromium-'));
    ({ browser, process: chromiumProcess } = await startChromium(CHROMIUM!, userDataDir));
    context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    page = await newPage(context);
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    if (chromiumProcess && chromiumProcess.exitCode === null && chromiumProcess.signalCode === null) {
      const exited = new Promise((resolve) => chromiumProcess!.once('exit', resolve));
      process.kill(-chromiumProcess.pid!, 'SIGTERM');
      await exited;
    }
    await main?.close();
    await bare?.close();
    await engine?.close();
    await empty?.close();
    if (userDataDir) rmSync(userDataDir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }, 20_000);

  afterEach(() => {
    expect(pageErrors).toEqual([]);
  });

  const open = async (hash: string, target = page) => {
    await target.goto(`${url}${hash}`);
  };
  const openRun = async (id: string) => {
    await open(`#/runs/${encodeURIComponent(id)}`);
    await page.getByTestId('run-id').filter({ hasText: id }).waitFor();
  };
  const rowIds = async () => Promise.all((await page.getByTestId('run-row').all()).map(async (row) => (await row.getAttribute('data-run-id')) ?? ''));
  const segmentsOf = async (row: string) =>
    Promise.all(
      (await page.locator(`[data-testid="wf-row"][data-row="${row}"] [data-testid="wf-seg"]`).all()).map(async (seg) => ({
        kind: await seg.getAttribute('data-kind'),
        from: Number(await seg.getAttribute('data-from')),
        to: Number(await seg.getAttribute('data-to')),
      })),
    );

  it('draws a run with retries, a sleep, a signal wait and a child to scale, and shows a step’s output and tries', async () => {
    await openRun(ids.shipped);
    await page.getByTestId('waterfall').waitFor();
    const steps = await engine.client.getRunSteps(ids.shipped);
    const byName = Object.fromEntries(steps.map((s) => [s.name, s]));

    // charge-card: two failed tries, a retry delay before each next try, then the try that succeeded.
    const charge = await segmentsOf('step-charge-card');
    expect(charge.map((s) => s.kind)).toEqual(['failed', 'delay', 'failed', 'delay', 'ok']);
    for (let i = 1; i < charge.length; i++) expect(charge[i].from).toBeGreaterThanOrEqual(charge[i - 1].to);
    expect(charge[1].to - charge[1].from).toBeGreaterThanOrEqual(70); // the 80 ms retry delay, on the run's clock

    // The sleep and the signal wait are drawn from when they began to when they ended.
    const [sleep] = await segmentsOf('step-cool-off');
    expect(sleep.kind).toBe('wait');
    expect(sleep.to - sleep.from).toBeGreaterThanOrEqual(150);
    const [approval] = await segmentsOf('step-approval');
    expect(approval).toMatchObject({ kind: 'wait', from: byName.approval.startedAt, to: byName.approval.finishedAt });
    expect(approval.to - approval.from).toBeGreaterThan(0);

    // The child run is linked, and its step is drawn for the time the child took.
    const [child] = await page.getByTestId('run-facts').getByTestId('run-link').allTextContents();
    expect(child).toBe(`${ids.shipped}.notify-customer`);
    const [childBar] = await segmentsOf('step-notify-customer');
    expect(childBar.to - childBar.from).toBeGreaterThanOrEqual(120);

    // The steps table: a retried step took from its first try to its last (two 80 ms delays), not its last try's time.
    const chargeRow = page.getByTestId('step-row').filter({ has: page.getByTestId('step-open').getByText('charge-card', { exact: true }) });
    expect(Number(await chargeRow.getByTestId('step-duration').getAttribute('data-ms'))).toBeGreaterThanOrEqual(160);

    // Selecting a step shows its output and every try with its error.
    await page.getByTestId('wf-step').filter({ hasText: 'charge-card' }).click();
    const panel = page.getByTestId('step-panel');
    await panel.waitFor();
    expect(JSON.parse((await panel.getByTestId('step-panel-output').textContent()) ?? '')).toEqual({ charged: 42 });
    const tries = panel.getByTestId('try-row');
    expect(await tries.count()).toBe(3);
    expect(await tries.nth(0).textContent()).toContain('card network timeout');
    expect(await tries.nth(2).textContent()).toContain('succeeded');
  });

  it('shows a compensated run: its failure, its compensation and the step it undid', async () => {
    await openRun(ids.compensated);
    expect(await page.getByTestId('run-status').getByTestId('status').textContent()).toBe('failed');
    expect(await page.getByTestId('run-error').textContent()).toContain('amount 5000 is over the limit');
    expect(await page.getByTestId('run-compensated').textContent()).toContain('every compensation');
    const rows = await page.getByTestId('wf-row').evaluateAll((els) => els.map((el) => el.getAttribute('data-row')));
    expect(rows).toContain('comp-reserve-stock');
    const [undo] = await segmentsOf('comp-reserve-stock');
    expect(undo.kind).toBe('compensation');
  });

  it('filters runs by what they wait for, and finds a run by id and by idempotency key', async () => {
    await open('#/runs?waiting=signal%3Aapprove');
    await eventually(async () => (await rowIds()).sort().join() === [...ids.awaiting, ids.keyed].sort().join(), UI_TIMEOUT_MS);
    expect(await page.getByTestId('run-waiting').first().textContent()).toBe('waiting for signal "approve"');
    await open('#/runs?waiting=signal%3Areject');
    await page.getByText('No runs match.').waitFor();

    // Typed into the search box and submitted, as a person would.
    await open('#/runs');
    await page.getByTestId('search').fill(ids.shipped);
    await page.getByTestId('search').press('Enter');
    await eventually(async () => (await rowIds()).join() === ids.shipped, UI_TIMEOUT_MS);
    expect(page.url()).toContain(`q=${encodeURIComponent(ids.shipped)}`);
    await page.getByTestId('search').fill('order-A-4');
    await page.getByTestId('search').press('Enter');
    await eventually(async () => (await rowIds()).join() === ids.keyed, UI_TIMEOUT_MS);
  });

  it('sends a signal from the run page, confirmed, and the run goes on', async () => {
    const id = ids.awaiting[0];
    await openRun(id);
    await page.getByTestId('pending-wait').filter({ hasText: 'signal "approve"' }).waitFor();
    expect(await page.getByTestId('signal-name').inputValue()).toBe('approve');
    await page.getByTestId('signal-payload').fill('{"by":"the dashboard"}');
    dialogs.length = 0;
    await page.getByTestId('signal-send').click();
    await page
      .getByTestId('run-status')
      .getByTestId('status')
      .filter({ hasText: /^succeeded$/ })
      .waitFor({ timeout: 10_000 });
    expect(dialogs).toEqual([`Send signal "approve" to run ${id}?`]);
    // Screen readers hear the status change of the run on screen, and nothing else is live.
    await eventually(async () => (await page.getByTestId('announcer').textContent()) === `Run ${id} is now succeeded.`, UI_TIMEOUT_MS);
    expect(await page.locator('[aria-live]').count()).toBe(1);
    expect(await engine.client.getRun(id)).toMatchObject({ status: 'succeeded', output: { order: 'A-20', approvedBy: { by: 'the dashboard' } } });
    // The run's duration counts from its first start, waits included.
    const run = (await engine.client.getRun(id))!;
    expect(run.finishedAt! - run.startedAt!).toBeGreaterThanOrEqual(150);
  });

  it('resumes 200 failed runs in bulk by filter, with progress, after one confirmation with the count', async () => {
    importsFixed = true;
    await open('#/runs?workflow=import-batch&status=failed');
    await page.getByTestId('run-row').first().waitFor();
    await page.getByTestId('bulk-action').selectOption('resume');
    dialogs.length = 0;
    await page.getByTestId('bulk-filter').click();
    await page.locator('[data-testid="bulk-progress"][data-phase="finished"]').waitFor({ timeout: 30_000 });
    expect(dialogs).toEqual(['resume 200 runs matching workflow import-batch, status failed?']);
    expect(await page.getByTestId('bulk-result').textContent()).toContain('resume: 200 of 200 processed, 200 done, 0 skipped');
    // In batches of 100.
    expect(main.hits.filter((h) => h.route === '/api/runs/bulk').map((h) => h.query.get('ids')?.split(',').length)).toEqual([100, 100]);
    await eventually(async () => (await engine.client.countRuns({ workflow: 'import-batch', status: 'succeeded' })) === 200, 20_000);
  }, 60_000);

  it('keeps scroll, focus, selection and open details across five live refreshes', async () => {
    const small = await newPage(context);
    try {
      await small.setViewportSize({ width: 1000, height: 400 });
      await small.goto(`${url}#/runs?workflow=import-batch`);
      const eleventh = small.getByTestId('run-row').nth(10);
      await eleventh.waitFor();
      const target = (await eleventh.getAttribute('data-run-id'))!;
      const box = small.locator(`[data-testid="run-row"][data-run-id="${target}"] [data-testid="select-row"]`);
      await box.check();
      await box.focus();
      await small.evaluate(() => (globalThis as unknown as Win).scrollTo(0, 300));
      const before = await small.evaluate(() => (globalThis as unknown as Win).scrollY);
      expect(before).toBeGreaterThan(0);
      const polls = main.hits.filter((h) => h.route === '/api/runs').length;
      await eventually(() => main.hits.filter((h) => h.route === '/api/runs' && h.status === 200).length >= polls + 5, 15_000);
      expect(await small.evaluate(() => (globalThis as unknown as Win).scrollY)).toBe(before);
      expect(
        await small.evaluate(() => (globalThis as unknown as Win).document.activeElement?.closest('[data-testid="run-row"]')?.getAttribute('data-run-id')),
      ).toBe(target);
      expect(await box.isChecked()).toBe(true);

      // A live run's page: an output opened by the user stays open while it refreshes.
      await small.goto(`${url}#/runs/${encodeURIComponent(ids.awaiting[1])}`);
      const details = small.getByTestId('step-row').first().locator('details');
      await details.locator('summary').click();
      const runPolls = main.hits.filter((h) => h.route === '/api/run').length;
      await eventually(() => main.hits.filter((h) => h.route === '/api/run' && h.status === 200).length >= runPolls + 5, 15_000);
      expect(await details.getAttribute('open')).toBe('');
    } finally {
      await small.close();
    }
  }, 40_000);

  it('shows the versions of each workflow, with a banner for a version whose runs have no worker', async () => {
    await open('#/versions');
    const banner = page.getByTestId('versions-missing');
    await banner.waitFor();
    expect(await banner.textContent()).toContain('No worker for billing v1');
    const rows = page.getByTestId('version-row');
    expect(await rows.filter({ hasText: 'billing' }).count()).toBe(2);
    expect(await page.locator('[data-testid="version-row"][data-missing]').textContent()).toContain('v1');
  });

  it('lists queues, live workers and schedules, and starts a schedule now', async () => {
    await open('#/queues');
    const queue = page.locator('[data-testid="queue-row"][data-queue="mail"]');
    await queue.waitFor();
    expect(Number(await queue.getByTestId('queue-ended').textContent())).toBeGreaterThanOrEqual(1);
    // Pause the queue (the prompt asks for a note) and resume it.
    dialogs.length = 0;
    await queue.getByTestId('queue-pause').click();
    await queue.getByTestId('queue-resume').waitFor();
    expect(dialogs[0]).toContain('Pause queue "mail"?');
    expect(await queue.getByTestId('queue-state').textContent()).toContain('paused');
    expect(Object.keys(await createQueues(engine.client).paused())).toEqual(['mail']);
    await queue.getByTestId('queue-resume').click();
    await queue.getByTestId('queue-pause').waitFor();
    expect(await queue.getByTestId('queue-state').textContent()).toBe('active');
    expect(await createQueues(engine.client).paused()).toEqual({});
    await open('#/workers');
    await page.getByTestId('worker-row').first().waitFor();
    expect(await page.getByTestId('worker-row').count()).toBe((await engine.client.listWorkers()).length);
    await open('#/schedules');
    const row = page.locator('[data-testid="schedule-row"][data-schedule="nightly-mail"]');
    await row.waitFor();
    expect(await row.getByTestId('schedule-next').locator('li').count()).toBe(5);
    dialogs.length = 0;
    await row.getByTestId('schedule-trigger').click();
    await page.getByTestId('run-id').waitFor();
    expect(dialogs).toEqual(['Start schedule "nightly-mail" (notify) now?']);
    const started = (await page.getByTestId('run-id').textContent()) ?? '';
    expect((await engine.client.getRun(started))?.workflow).toBe('notify');

    // Pause (the prompt asks for a note) and resume: no next fire times while paused.
    await open('#/schedules');
    await row.waitFor();
    dialogs.length = 0;
    await row.getByTestId('schedule-pause').click();
    await row.getByTestId('schedule-resume').waitFor();
    expect(dialogs[0]).toContain('Pause schedule "nightly-mail"?');
    expect(await row.getByTestId('schedule-state').textContent()).toContain('paused');
    expect(await row.getByTestId('schedule-next').locator('li').count()).toBe(0);
    expect((await createSchedules(engine.client).get('nightly-mail'))?.paused).toBeDefined();
    await row.getByTestId('schedule-resume').click();
    await row.getByTestId('schedule-pause').waitFor();
    expect(await row.getByTestId('schedule-state').textContent()).toContain('active');
    expect(await row.getByTestId('schedule-next').locator('li').count()).toBe(5);
  });

  it('pauses live updates with a toggle', async () => {
    await open('#/runs');
    await page.getByTestId('run-row').first().waitFor();
    await page.getByTestId('toggle-live').click();
    expect(await page.getByTestId('toggle-live').getAttribute('aria-pressed')).toBe('true');
    await sleepFor(300);
    const polls = main.hits.filter((h) => h.route === '/api/runs').length;
    await sleepFor(3_500); // more than two poll periods
    expect(main.hits.filter((h) => h.route === '/api/runs').length).toBe(polls);
    await page.getByTestId('toggle-live').click();
    await eventually(() => main.hits.filter((h) => h.route === '/api/runs').length > polls, UI_TIMEOUT_MS);
  });

  /** Violations of impact serious or critical on the page as it is now. */
  async function axeViolations(target: Page): Promise<string[]> {
    await target.evaluate(AXE);
    const { violations } = await target.evaluate(() => {
      const w = globalThis as unknown as Win;
      return w.axe.run(w.document, { resultTypes: ['violations'] });
    });
    return violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(' ')).join(', ')})`);
  }

  it.each(['light', 'dark'] as const)(
    'has no serious or critical axe-core violation on any page, empty states included (%s)',
    async (scheme) => {
      const themed = await browser!.newContext({ viewport: { width: 1280, height: 900 }, colorScheme: scheme });
      try {
        const tab = await newPage(themed);
        const found: Record<string, string[]> = {};
        const check = async (origin: string, hash: string, ready: string) => {
          const where = `${origin === bare.origin ? 'empty ' : ''}${hash}`;
          await tab.goto(`${origin}/redflow/${hash}`);
          try {
            await tab.locator('main h1').first().waitFor();
            await tab.locator('main [aria-busy="true"]').waitFor({ state: 'detached' });
            await tab.locator(ready).first().waitFor();
          } catch {
            found[where] = [`did not show ${ready}: ${(await tab.locator('main').textContent()) ?? ''}`];
            return;
          }
          const violations = await axeViolations(tab);
          if (violations.length) found[where] = violations;
        };
        for (const hash of PAGES) await check(main.origin, hash, 'main h1');
        await check(main.origin, `#/runs/${encodeURIComponent(ids.shipped)}`, '[data-testid="waterfall"]');
        await check(main.origin, `#/runs/${encodeURIComponent(ids.awaiting[2])}`, '[data-testid="signal-form"]');
        await check(main.origin, `#/runs/${encodeURIComponent(ids.compensated)}`, '[data-testid="run-error"]');
        for (const hash of PAGES) await check(bare.origin, hash, 'main h1');
        await check(bare.origin, '#/runs/no-such-run', '[data-testid="page-error"]');
        expect(found).toEqual({});
      } finally {
        await themed.close();
      }
    },
    90_000,
  );

  it('fits a 360 px screen: no page scrolls sideways', async () => {
    const phone = await browser!.newContext({ viewport: { width: 360, height: 740 } });
    try {
      const tab = await newPage(phone);
      const wide: string[] = [];
      for (const hash of [...PAGES, `#/runs/${encodeURIComponent(ids.shipped)}`, `#/runs/${encodeURIComponent(ids.awaiting[2])}`]) {
        await tab.goto(`${url}${hash}`);
        await tab.locator('main h1').first().waitFor();
        await tab.locator('main [aria-busy="true"]').waitFor({ state: 'detached' });
        const { scrollWidth, clientWidth } = await tab.evaluate(() => {
          const { scrollWidth, clientWidth } = (globalThis as unknown as Win).document.documentElement;
          return { scrollWidth, clientWidth };
        });
        if (scrollWidth > clientWidth) wide.push(`${hash}: ${scrollWidth} px`);
      }
      expect(wide).toEqual([]);
    } finally {
      await phone.close();
    }
  }, 60_000);
});

const sleepFor = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
