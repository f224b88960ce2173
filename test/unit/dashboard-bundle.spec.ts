import { readFileSync } from 'node:fs';
import { build } from 'esbuild';

const { uiBuildOptions } = require('../../scripts/build-ui.js') as { uiBuildOptions: Parameters<typeof build>[0] & { outfile: string } };

describe('the dashboard bundle', () => {
  it('is what scripts/build-ui.js makes of lib/dashboard/ui today (run `npm run build:ui` after changing the page)', async () => {
    const result = await build({ ...uiBuildOptions, write: false });
    const fresh = result.outputFiles[0].text;
    const committed = readFileSync(uiBuildOptions.outfile, 'utf8');
    expect(committed === fresh).toBe(true);
  }, 60_000);

  it('loads nothing from elsewhere: no URL to another origin, no eval, no inline handler', () => {
    const bundle = readFileSync(uiBuildOptions.outfile, 'utf8');
    expect(bundle).not.toMatch(/\bimport\(\s*["'`]https?:/);
    expect(bundle).not.toMatch(/\beval\(/);
    expect(bundle).not.toMatch(/new Function\(/);
  });
});
