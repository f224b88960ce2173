// The docs site: `npm run docs` runs typedoc, scripts/check-docs-links.mjs, then `vitepress build docs`
// (output in docs/.vitepress/dist, gitignored; `npm run docs:dev` serves it live).
// Pages: every .md file under docs/. The sidebar is generated below from the files present: "Guides" is
// docs/guide/*.md (GUIDE_ORDER first, then alphabetically), "Operating" and "Reference" the top-level
// docs/*.md; a page's title is its first `# ` heading. Add a page, not config.
// API reference: typedoc (typedoc.json: typedoc-plugin-markdown + typedoc-vitepress-theme) writes markdown
// and typedoc-sidebar.json into docs/api (gitignored), rendered like any page. Markdown stays Markdown:
// `html: false` and `{{` escaped, so no page or JSDoc text is compiled as Vue; heading ids are GitHub's.
// Links: the check script tests every internal link and #anchor before the build, and VitePress fails on
// a dead link too (ignoreDeadLinks stays off); a link out of docs/ becomes a GitHub link if the file exists.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { defineConfig, type DefaultTheme, type MarkdownRenderer } from 'vitepress';

const repository = 'https://github.com/nestjs-redflow/nestjs-redflow';
const branch = 'main';

const docsDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const repoDir = resolve(docsDir, '..');

/** The guides in reading order; a guide not listed comes after these, alphabetically. */
const GUIDE_ORDER = [
  'getting-started',
  'workflows-and-steps',
  'waits-and-signals',
  'sagas',
  'versions',
  'schedules',
  'flow-control',
  'testing',
  'dashboard',
  'observability',
  'redis-cluster',
  'security',
];

/** Top-level pages about running redflow; every other top-level page is "Reference". */
const OPERATING_ORDER = [
  'production',
  'migrating-from-bullmq',
  'migrating-from-nestjs-schedule',
  'changing-workflows',
  'dashboard-security',
  'health-and-metrics',
  'tracing',
];
const REFERENCE_ORDER = [
  'reference',
  'glossary',
  'compatibility',
  'edges',
  'faults',
  'nest-and-dashboard',
  'dashboard-api',
  'engine',
  'performance',
  'why-redflow',
];

const escapeHtml = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A page's first `# ` heading (outside front matter and code fences), as the sidebar's HTML. */
function pageTitle(file: string): string {
  let inFence = false;
  let lines = readFileSync(file, 'utf8').split(/\r?\n/);
  if (lines[0] === '---') lines = lines.slice(lines.indexOf('---', 1) + 1);
  for (const line of lines) {
    if (/^\s*(```|~~~)/.test(line)) inFence = !inFence;
    const heading = !inFence && /^# +(.+?)(?:\s+\{#[^}]*\})?\s*#*\s*$/.exec(line);
    if (heading) return escapeHtml(heading[1]).replace(/`([^`]+)`/g, '<code>$1</code>');
  }
  return file.slice(file.lastIndexOf(sep) + 1, -'.md'.length);
}

/** The pages of a folder of docs/ (not index.md), ordered by `order`, then alphabetically. */
function pages(folder: string, order: string[], keep: (name: string) => boolean = () => true): DefaultTheme.SidebarItem[] {
  const dir = join(docsDir, folder);
  if (!existsSync(dir)) return [];
  const rank = (name: string) => (order.includes(name) ? order.indexOf(name) : order.length);
  return readdirSync(dir)
    .filter((file) => file.endsWith('.md') && file !== 'index.md' && keep(file.slice(0, -3)))
    .map((file) => file.slice(0, -3))
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map((name) => ({ text: pageTitle(join(dir, `${name}.md`)), link: `/${folder ? `${folder}/` : ''}${name}` }));
}

/** typedoc's sidebar, each entry point named as it is imported (`nestjs-redflow/core/testing`, from package.json's exports). */
function apiSidebar(): DefaultTheme.SidebarItem[] {
  const file = join(docsDir, 'api', 'typedoc-sidebar.json');
  if (!existsSync(file)) return [];
  const exportsMap: Record<string, { default: string } | string> = JSON.parse(readFileSync(join(repoDir, 'package.json'), 'utf8')).exports;
  const importPath = new Map<string, string>();
  for (const [subpath, target] of Object.entries(exportsMap)) {
    if (typeof target === 'string') continue;
    const module = target.default
      .replace(/^\.\/dist\//, '')
      .replace(/\.js$/, '')
      .replace(/\/index$/, '');
    importPath.set(module, `nestjs-redflow${subpath.slice(1)}`);
  }
  const rename = (items: DefaultTheme.SidebarItem[]): DefaultTheme.SidebarItem[] =>
    items.map((item) => {
      const module = /^\/api\/(.+)\/$/.exec(item.link ?? '')?.[1];
      return { ...item, text: (module && importPath.get(module)) || item.text, ...(item.items && { items: rename(item.items) }) };
    });
  const items = rename(JSON.parse(readFileSync(file, 'utf8')));
  return items.sort((a, b) => Number(b.text === 'nestjs-redflow') - Number(a.text === 'nestjs-redflow'));
}

/** Rewrites a relative link that leaves docs/ to the file on GitHub, when the file exists (else the link checker reports it). */
function repositoryLinks(md: MarkdownRenderer) {
  md.core.ruler.push('redflow_repository_links', (state) => {
    const page: string | undefined = state.env?.path;
    if (!page) return;
    for (const block of state.tokens) {
      for (const token of block.children ?? []) {
        const href = token.type === 'link_open' ? token.attrGet('href') : null;
        if (!href || /^([a-z][a-z\d+.-]*:|\/|#)/i.test(href)) continue;
        const cut = href.search(/[?#]/);
        const [path, suffix] = cut < 0 ? [href, ''] : [href.slice(0, cut), href.slice(cut)];
        let target: string;
        try {
          target = resolve(dirname(page), decodeURIComponent(path));
        } catch {
          continue; // a malformed %-escape: left as written, and reported by the link check
        }
        if (!relative(docsDir, target).startsWith('..') || !existsSync(target)) continue;
        const kind = statSync(target).isDirectory() ? 'tree' : 'blob';
        token.attrSet('href', `${repository}/${kind}/${branch}/${relative(repoDir, target).split(sep).join('/')}${suffix}`);
      }
    }
  });
}

/**
 * Heading ids as GitHub makes them (github-slugger: lower case, punctuation dropped, each space a dash),
 * not VitePress's (which merges dashes): `page.md#section` then works on the site and on GitHub alike.
 */
const githubSlug = (text: string) =>
  text
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc}\- ]/gu, '')
    .replace(/ /g, '-');

/** `{{` in text or inline code would be a Vue interpolation: write it as entities. */
function escapeMustaches(md: MarkdownRenderer) {
  for (const rule of ['text', 'code_inline'] as const) {
    const render = md.renderer.rules[rule]!;
    md.renderer.rules[rule] = (...args) => render(...args).replace(/\{\{/g, '&#123;&#123;');
  }
}

const guides = pages('guide', GUIDE_ORDER);
const operating = pages('', OPERATING_ORDER, (name) => OPERATING_ORDER.includes(name));
const reference = pages('', REFERENCE_ORDER, (name) => !OPERATING_ORDER.includes(name));
const api = apiSidebar();

export default defineConfig({
  title: 'nestjs-redflow',
  description: 'Durable, Redis-backed workflows for NestJS',
  markdown: {
    html: false,
    anchor: { slugify: githubSlug },
    config(md) {
      repositoryLinks(md);
      escapeMustaches(md);
    },
  },
  themeConfig: {
    nav: [
      { text: 'Guide', link: guides[0]?.link ?? operating[0]?.link ?? '/' },
      { text: 'TypeDoc API', link: '/api/' },
    ],
    sidebar: {
      '/api/': [{ text: 'TypeDoc API reference', link: '/api/', items: api }],
      '/': [
        ...(guides.length ? [{ text: 'Guides', items: guides, ...(existsSync(join(docsDir, 'guide', 'index.md')) && { link: '/guide/' }) }] : []),
        ...(operating.length ? [{ text: 'Operating', items: operating }] : []),
        ...(reference.length ? [{ text: 'Reference', items: reference }] : []),
        { text: 'TypeDoc API reference', link: '/api/' },
      ],
    },
    socialLinks: [{ icon: 'github', link: repository }],
    search: { provider: 'local' },
    outline: [2, 3],
  },
  // The local search index holds every page, the API reference included: one chunk of about 1 MB.
  vite: { build: { chunkSizeWarningLimit: 4096 } },
});
