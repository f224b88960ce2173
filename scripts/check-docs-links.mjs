// Checks every internal link of the docs site before it is built (`npm run docs` runs it after typedoc,
// before `vitepress build`), and exits 1 listing each broken one with its file and line.
// - Pages are read with the site's own config and Markdown renderer (vitepress resolveConfig and
//   createMarkdownRenderer), so heading ids are the ones the site gets: `page.md#section` is checked
//   against the headings of page.md, `#section` against the page's own.
// - Checked: Markdown links and images of every page under docs/ (the API reference in docs/api too,
//   once typedoc wrote it), the links of a home page's front matter (hero actions, features), and the
//   config's nav and sidebar. A link resolves like VitePress does: relative to the page, or to docs/ when
//   it starts with `/`; `x`, `x.md` and `x.html` are the page x.md, `dir/` is dir/index.md; anything
//   else must be a file in docs/ or docs/public/.
// - A relative link that leaves docs/ (`../lib/core/index.ts`, `../README.md#install`) is rewritten by
//   the site's config to the file on GitHub (branch main) when the file exists in the repository; its
//   anchor is not checked (GitHub's ids are GitHub's). A link out of docs/ to a file that does not exist
//   is reported here as broken.
// - External links (http:, https:, mailto:, ...) are not checked: the check needs no network.
// Usage: node scripts/check-docs-links.mjs [docs directory, default docs]
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMarkdownRenderer, resolveConfig } from 'vitepress';

const repoDir = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const docsDir = resolve(repoDir, process.argv[2] ?? 'docs');
const started = Date.now();

const config = await resolveConfig(docsDir, 'build', 'production');
const srcDir = config.srcDir;
const md = await createMarkdownRenderer(srcDir, config.markdown, config.site.base, config.logger);
const pages = new Set(config.pages);
const shown = (file) => relative(process.cwd(), file) || '.';

/** Page (relative to srcDir) -> its source, links as written (before rendering normalizes them), front matter and heading ids. */
const rendered = new Map();
function render(page) {
  let result = rendered.get(page);
  if (!result) {
    const file = join(srcDir, page);
    const source = readFileSync(file, 'utf8');
    const env = { path: file, relativePath: page, cleanUrls: config.cleanUrls };
    const tokens = md.parse(source, env);
    const links = [];
    for (const block of tokens) {
      for (const token of block.children ?? []) {
        const href = token.type === 'link_open' ? token.attrGet('href') : token.type === 'image' ? token.attrGet('src') : null;
        if (href !== null) links.push({ href, line: lineOf(source, href, block.map?.[0] ?? 0) });
      }
    }
    const html = md.renderer.render(tokens, md.options, env);
    const ids = new Set([...html.matchAll(/\sid="([^"]*)"/g)].map((m) => decodeHtml(m[1])));
    result = { source, links, frontmatter: env.frontmatter ?? {}, ids };
    rendered.set(page, result);
  }
  return result;
}

function decodeHtml(text) {
  return text.replace(/&(amp|lt|gt|quot|#39);/g, (_, e) => ({ amp: '&', lt: '<', gt: '>', quot: '"', '#39': "'" })[e]);
}

function safeDecode(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Why `href`, written in `fromPage` (relative to srcDir; undefined for the config), is broken, or null. */
function problem(href, fromPage) {
  if (/^[a-z][a-z\d+.-]*:/i.test(href) || href.startsWith('//')) return null;
  const cut = href.search(/[?#]/);
  const path = safeDecode(cut < 0 ? href : href.slice(0, cut));
  const hash = cut < 0 ? '' : href.slice(cut).replace(/^\?[^#]*/, '');
  const anchor = hash.length > 1 ? safeDecode(hash.slice(1)) : '';
  let page;
  if (!path) {
    if (!fromPage) return 'an empty link';
    page = fromPage;
  } else {
    const base = path.startsWith('/') ? srcDir : dirname(join(srcDir, fromPage ?? 'index.md'));
    const target = resolve(base, path.startsWith('/') ? `.${path}` : path);
    const rel = relative(srcDir, target).split('\\').join('/');
    if (rel.startsWith('..')) {
      return existsSync(target) ? null : `leaves docs/ for ${shown(target)}, which does not exist`;
    }
    const ext = extname(rel);
    const candidates = path.endsWith('/')
      ? [`${rel ? `${rel}/` : ''}index.md`]
      : ext === '.md'
        ? [rel]
        : ext === '.html'
          ? [`${rel.slice(0, -'.html'.length)}.md`]
          : [`${rel}.md`, `${rel}/index.md`];
    page = candidates.find((c) => pages.has(c));
    if (!page) {
      if (ext === '.md' || ext === '.html' || path.endsWith('/')) return `no such page: ${shown(join(srcDir, candidates[0]))}`;
      const isFile = [target, join(srcDir, 'public', rel)].some((f) => existsSync(f) && statSync(f).isFile());
      return isFile ? null : `no such page or file: ${shown(ext ? target : join(srcDir, candidates[0]))}`;
    }
  }
  if (anchor && !render(page).ids.has(anchor)) return `no heading with id "${anchor}" in ${shown(join(srcDir, page))}`;
  return null;
}

const broken = [];
let checked = 0;
function check(href, fromPage, where) {
  checked++;
  const why = problem(href, fromPage);
  if (why) broken.push(`${where}  ${href}  (${why})`);
}

/** The 1-based line of `needle` in `source` at or after line `from` (0-based), else `from` + 1. */
function lineOf(source, needle, from = 0) {
  const lines = source.split('\n');
  for (let i = from; i < lines.length; i++) if (lines[i].includes(needle)) return i + 1;
  return from + 1;
}

for (const page of [...pages].sort()) {
  const { source, links, frontmatter: front } = render(page);
  const file = shown(join(srcDir, page));
  for (const { href, line } of links) check(href, page, `${file}:${line}`);
  for (const item of [...(front.hero?.actions ?? []), ...(Array.isArray(front.features) ? front.features : [])]) {
    if (typeof item?.link === 'string') check(item.link, page, `${file}:${lineOf(source, item.link)} (front matter)`);
  }
}

const configFile = shown(config.configPath ?? join(srcDir, '.vitepress', 'config'));
function checkItems(items, what) {
  for (const item of items ?? []) {
    if (typeof item.link === 'string') check(item.link, undefined, `${configFile} (${what} "${item.text ?? ''}")`);
    checkItems(item.items, what);
  }
}
const theme = config.site.themeConfig ?? {};
checkItems(theme.nav, 'nav');
const sidebar = theme.sidebar ?? [];
for (const items of Array.isArray(sidebar) ? [sidebar] : Object.values(sidebar)) checkItems(Array.isArray(items) ? items : items.items, 'sidebar');

const seconds = ((Date.now() - started) / 1000).toFixed(1);
if (broken.length) {
  console.error(`Broken links in the docs (${broken.length}):`);
  for (const line of broken) console.error(`  ${line}`);
  process.exit(1);
}
console.log(`Docs links: ${checked} links in ${pages.size} pages checked, none broken (${seconds} s).`);
