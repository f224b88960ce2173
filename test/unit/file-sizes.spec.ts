import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** Each file under lib/ holds one job: none grows past 400 lines (docs/engine.md has the file map). */
const ROOT = join(__dirname, '..', '..');
const LIMIT = 400;

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

describe('file sizes', () => {
  it(`no TypeScript file under lib/ is over ${LIMIT} lines`, () => {
    const files = sourceFiles(join(ROOT, 'lib'));
    expect(files.length).toBeGreaterThan(100);
    const over = files.map((file) => ({ file: relative(ROOT, file), lines: readFileSync(file, 'utf8').split('\n').length - 1 })).filter((f) => f.lines > LIMIT);
    expect(over).toEqual([]);
  });
});
