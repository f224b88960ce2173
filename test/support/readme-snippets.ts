import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import * as ts from 'typescript';

/**
 * README's TypeScript blocks, found and compiled (test/package/readme-snippets.spec.ts) or run
 * (test/nest/readme-quick-start.spec.ts).
 *
 * Every ```ts block of README.md compiles, strict, against the sources of this repository: a
 * snippet importing `nestjs-redflow` or `nestjs-redflow/<entry>` gets the file the package's
 * `exports` map names for that entry (dist/x.d.ts read as lib/x.ts). Each block is a module of its
 * own; a block whose first line is a file name (`// src/app.module.ts`) is that file, so the quick
 * start's files import each other. Names that feature sections use without defining (`client`,
 * `step`, a `payments` service) are declared in readme-snippets.context.ts, and the app's own files
 * that snippets import (`./auth/admin.guard`) are in readme-snippets/, placed beside the snippets of
 * every markdown file. A block preceded by `<!-- snippet: skip (reason) -->` is not compiled; the
 * test lists those. The docs' blocks are compiled the same way, each markdown file an app of its own.
 */

const ROOT = join(__dirname, '..', '..');
const PACKAGE_TESTS = join(ROOT, 'test', 'package');
/** Where the snippets seem to live: inside the repository, so node_modules resolves. Never written. */
export const SNIPPET_DIR = join(ROOT, '.readme-snippets');
const CONTEXT = join(PACKAGE_TESTS, 'readme-snippets.context.ts');
/** Files of the user's app that snippets import (`./auth/admin.guard`), placed beside the snippets. */
const APP_FILES = join(PACKAGE_TESTS, 'readme-snippets');

/** The folder a markdown file's snippets are compiled in: README's at the root, each doc's in a folder of its own. */
export function snippetRoot(source: string): string {
  return source === 'README.md' ? SNIPPET_DIR : join(SNIPPET_DIR, source.replace(/\W/g, '-'));
}

export interface Snippet {
  /** Absolute (virtual) path the snippet is compiled as. */
  file: string;
  /** The markdown file it comes from. */
  source: string;
  /** 1-based line in the markdown of the snippet's first code line. */
  line: number;
  code: string;
}

export interface SkippedSnippet {
  line: number;
  reason: string;
}

const FENCE_OPEN = /^```(ts|typescript)\s*$/;
const FENCE_CLOSE = /^```\s*$/;
const SKIP = /^<!--\s*snippet:\s*skip\s*\((.+)\)\s*-->$/;
const FILE_NAME = /^\/\/ ((?:[\w.-]+\/)*[\w.-]+\.ts)(?::.*)?$/;

/** The ```ts blocks of a markdown text, and the ones marked to skip. */
export function extractSnippets(markdown: string, source = 'README.md'): { snippets: Snippet[]; skipped: SkippedSnippet[] } {
  const lines = markdown.split('\n');
  const snippets: Snippet[] = [];
  const skipped: SkippedSnippet[] = [];
  const names = new Set<string>();
  let previous = '';
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    if (!FENCE_OPEN.test(line)) {
      if (line.trim() !== '') previous = line.trim();
      continue;
    }
    const start = i + 1;
    let end = start;
    while (end < lines.length && !FENCE_CLOSE.test(lines[end])) end++;
    const code = lines.slice(start, end).join('\n');
    const skip = SKIP.exec(previous);
    if (skip) {
      skipped.push({ line: start + 1, reason: skip[1] });
    } else {
      const named = FILE_NAME.exec(lines[start] ?? '');
      const name = named ? named[1] : `snippet-line-${start + 1}.ts`;
      if (names.has(name)) throw new Error(`${source}:${start + 1}: a second snippet names the file "${name}". Give it another file name.`);
      names.add(name);
      // Each markdown file's snippets form an app of their own.
      snippets.push({ file: join(snippetRoot(source), name), source, line: start + 1, code });
    }
    previous = '';
    i = end;
  }
  return { snippets, skipped };
}

/** `nestjs-redflow` and its subpaths, mapped through package.json `exports` to the sources. */
function packagePaths(): Record<string, string[]> {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { name: string; exports: Record<string, string | { types?: string }> };
  const paths: Record<string, string[]> = {};
  for (const [subpath, target] of Object.entries(pkg.exports)) {
    if (typeof target === 'string' || !target.types) continue;
    const source = target.types.replace(/^\.\/dist\//, 'lib/').replace(/\.d\.ts$/, '.ts');
    paths[subpath === '.' ? pkg.name : `${pkg.name}/${subpath.slice(2)}`] = [join(ROOT, source)];
  }
  return paths;
}

const OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext, // top-level await, as in an ESM app
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  moduleDetection: ts.ModuleDetectionKind.Force,
  lib: ['lib.es2022.d.ts'],
  types: ['node', 'jest'],
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  esModuleInterop: true,
  experimentalDecorators: true,
  emitDecoratorMetadata: true,
  // What a Nest app built with SWC or esbuild has on: the README's `import type` advice is checked.
  isolatedModules: true,
  resolveJsonModule: true,
};

/** Compiles the snippets; returns one line per error, `README.md:<line>` first when it is in a snippet. */
export function compileSnippets(snippets: Snippet[]): string[] {
  const byFile = new Map(snippets.map((s) => [s.file, s]));
  // The app's own files, beside the snippets of each markdown file.
  const roots = [...new Set(snippets.map((s) => snippetRoot(s.source)))];
  const appFiles = new Map(
    readdirSync(APP_FILES, { recursive: true, encoding: 'utf8' })
      .filter((f) => f.endsWith('.ts'))
      .flatMap((f) => roots.map((root) => [join(root, f), join(APP_FILES, f)] as const)),
  );
  const host = ts.createCompilerHost(OPTIONS, true);
  const { fileExists, readFile, getSourceFile, directoryExists } = host;
  host.fileExists = (file) => byFile.has(file) || appFiles.has(file) || fileExists.call(host, file);
  host.readFile = (file) => byFile.get(file)?.code ?? readFile.call(host, appFiles.get(file) ?? file);
  host.directoryExists = (dir) =>
    [...byFile.keys(), ...appFiles.keys()].some((f) => f.startsWith(dir + '/') || dirname(f) === dir) || (directoryExists?.call(host, dir) ?? true);
  host.getSourceFile = (file, language, onError, createNew) => {
    const snippet = byFile.get(file);
    if (snippet) return ts.createSourceFile(file, snippet.code, language, true);
    const appFile = appFiles.get(file);
    if (appFile) return ts.createSourceFile(file, readFileSync(appFile, 'utf8'), language, true);
    return getSourceFile.call(host, file, language, onError, createNew);
  };
  const program = ts.createProgram({ rootNames: [...byFile.keys(), CONTEXT], options: { ...OPTIONS, paths: packagePaths() }, host });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const text = ts.flattenDiagnosticMessageText(d.messageText, '\n');
    if (!d.file || d.start === undefined) return `TS${d.code}: ${text}`;
    const { line, character } = d.file.getLineAndCharacterOfPosition(d.start);
    const snippet = byFile.get(d.file.fileName);
    if (snippet) return `${snippet.source}:${snippet.line + line}:${character + 1} (snippet ${relative(SNIPPET_DIR, snippet.file)}): TS${d.code}: ${text}`;
    return `${relative(ROOT, d.file.fileName)}:${line + 1}:${character + 1}: TS${d.code}: ${text}`;
  });
}
