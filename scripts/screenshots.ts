// `npm run screenshots`: the dashboard's pages photographed from a demo (scripts/dashboard-demo.ts)
// in Debian's chromium, into docs/screenshots/, so the pictures in README and docs stay true.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

import { startDemo } from './dashboard-demo';

const OUT = join(__dirname, '..', 'docs', 'screenshots');

async function main(): Promise<void> {
  const executablePath = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
  if (!executablePath) throw new Error('npm run screenshots needs chromium: apt-get install -y chromium (Debian).');
  const demo = await startDemo();
  const browser = await chromium.launch({ executablePath, args: ['--no-sandbox', '--disable-gpu'] });
  const errors: string[] = [];
  try {
    mkdirSync(OUT, { recursive: true });
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 }, colorScheme: 'light' });
    page.on('pageerror', (error) => errors.push(error.message));
    page.on('console', (message) => message.type() === 'error' && errors.push(message.text()));
    const shoot = async (hash: string, file: string, ready: string, prepare?: () => Promise<void>) => {
      await page.goto(`${demo.url}${hash}`);
      await page.getByTestId(ready).first().waitFor({ timeout: 10_000 });
      await prepare?.();
      await page.screenshot({ path: join(OUT, file), fullPage: true });
      console.log(`docs/screenshots/${file}`);
    };
    await shoot('#/runs', 'runs.png', 'run-row');
    await shoot(`#/runs/${encodeURIComponent(demo.ids.shipped)}`, 'run.png', 'waterfall', async () => {
      await page.getByTestId('wf-step').filter({ hasText: 'charge-card' }).click();
      await page.getByTestId('step-panel').waitFor();
    });
    await shoot('#/queues', 'queues.png', 'queues-table');
    await shoot('#/versions', 'versions.png', 'versions-table');
    if (errors.length) throw new Error(`The page reported errors: ${errors.join('; ')}`);
  } finally {
    await browser.close();
    await demo.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
