import { readFileSync } from 'node:fs';
import { join } from 'node:path';

import { compileSnippets, extractSnippets } from '../support/readme-snippets';

/**
 * Every ```ts block of README.md and of the docs in DOC_FILES compiles, strict, against the sources
 * (how: test/support/readme-snippets.ts). Names that feature sections use without defining them are
 * declared in readme-snippets.context.ts; the app's own files that snippets import are in
 * readme-snippets/.
 */

const ROOT = join(__dirname, '..', '..');
const clusterMode = process.env.REDFLOW_TEST_CLUSTER === '1';
/** Docs whose ```ts blocks are compiled too: the guides, the reference, and the docs with examples. */
const DOC_FILES = [
  'docs/guide/getting-started.md',
  'docs/guide/workflows-and-steps.md',
  'docs/guide/waits-and-signals.md',
  'docs/guide/sagas.md',
  'docs/guide/versions.md',
  'docs/guide/schedules.md',
  'docs/guide/flow-control.md',
  'docs/guide/testing.md',
  'docs/guide/dashboard.md',
  'docs/guide/observability.md',
  'docs/guide/redis-cluster.md',
  'docs/guide/security.md',
  'docs/reference.md',
  'docs/glossary.md',
  'docs/migrating-from-bullmq.md',
  'docs/migrating-from-nestjs-schedule.md',
  'docs/changing-workflows.md',
  'docs/tracing.md',
  'docs/health-and-metrics.md',
];

(clusterMode ? describe.skip : describe)('README snippets', () => {
  const readme = extractSnippets(readFileSync(join(ROOT, 'README.md'), 'utf8'));
  const { snippets } = readme;
  // The docs' snippets, each file an app of its own, compiled in the same program.
  const docFiles = DOC_FILES.map((file) => ({ file, ...extractSnippets(readFileSync(join(ROOT, file), 'utf8'), file) }));
  const docs = docFiles.flatMap((d) => d.snippets);
  const skipped = [...readme.skipped.map((s) => ({ ...s, source: 'README.md' })), ...docFiles.flatMap((d) => d.skipped.map((s) => ({ ...s, source: d.file })))];
  // A markdown file with one type error, compiled in the same program, proves errors are found and
  // located (one compilation for both keeps the test short).
  const broken = extractSnippets(
    ['# t', '', '```ts', "import { createTestEngine } from 'nestjs-redflow/core/testing';", "const n: number = 'one';", 'createTestEngine;', '```', ''].join(
      '\n',
    ),
    'broken.md',
  ).snippets;
  let errors: string[] = [];

  beforeAll(() => {
    errors = compileSnippets([...snippets, ...docs, ...broken]);
  }, 60_000);

  it('finds the TypeScript blocks, and skips only a few, each with its reason', () => {
    // README is a front page: its quick starts (the Nest app's four files, the core engine); the guides hold the rest.
    expect(snippets.length).toBeGreaterThanOrEqual(5);
    expect(snippets.length + docs.length).toBeGreaterThan(60);
    for (const s of skipped) expect(s.reason.trim().length).toBeGreaterThan(5);
    // Listed so a reader of the test output sees what is compiled and what is not.
    const perFile = docFiles.map((d) => `\n  ${d.file}: ${d.snippets.length}`).join('');
    process.stdout.write(
      `README snippets: ${snippets.length} compiled; docs: ${docs.length} compiled${perFile}\n` +
        `${skipped.length} skipped${skipped.map((s) => `\n  ${s.source}:${s.line}: ${s.reason}`).join('')}\n`,
    );
    expect(skipped.length).toBeLessThanOrEqual(3);
  });

  it('compiles every block with zero errors (strict, isolatedModules, decorator metadata)', () => {
    expect(errors.filter((e) => !e.startsWith('broken.md:'))).toEqual([]);
  });

  it('compiles the blocks of the docs too', () => {
    expect([...new Set(docs.map((s) => s.source))]).toEqual(DOC_FILES);
  });

  it('leaves out a block marked `<!-- snippet: skip (reason) -->`, with its line and reason', () => {
    const markdown = [
      '<!-- snippet: skip (a fragment of a class body) -->',
      '',
      '```ts',
      '@Step() charge() {}',
      '```',
      '',
      '```ts',
      'export const n = 1;',
      '```',
    ].join('\n');
    const { snippets: kept, skipped: left } = extractSnippets(markdown, 'skip.md');
    expect(left).toEqual([{ line: 4, reason: 'a fragment of a class body' }]);
    expect(kept.map((s) => [s.line, s.code])).toEqual([[8, 'export const n = 1;']]);
  });

  it('reports a type error at its line in the markdown', () => {
    expect(errors.filter((e) => e.startsWith('broken.md:'))).toEqual([
      "broken.md:5:7 (snippet broken-md/snippet-line-4.ts): TS2322: Type 'string' is not assignable to type 'number'.",
    ]);
  });
});
