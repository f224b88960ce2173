import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { buildAndPack } from '../support/packed';

/**
 * The published package as a user gets it: `npm pack`, then `npm install <tarball>` into an empty
 * folder with no Nest and no class-validator, then a two-step workflow run through
 * `nestjs-redflow/core` on the test Redis. Builds dist/ first (about 10 s).
 */

const clusterMode = process.env.REDFLOW_TEST_CLUSTER === '1';

(clusterMode ? describe.skip : describe)('the packed package', () => {
  let dir: string;
  let tarball: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'redflow-pack-'));
    tarball = await buildAndPack(dir);
    const app = join(dir, 'app');
    execFileSync('mkdir', [app]);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'plain-node-app', version: '1.0.0', private: true }));
    // ioredis and croner come from the npm cache when it has them.
    execFileSync('npm', ['install', tarball, '--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'], { cwd: app, stdio: 'pipe' });
  }, 120_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('installs without any @nestjs package, class-validator, class-transformer, reflect-metadata, rxjs or @opentelemetry package', () => {
    const modules = join(dir, 'app', 'node_modules');
    expect(existsSync(join(modules, 'nestjs-redflow', 'dist', 'core', 'index.js'))).toBe(true);
    for (const absent of ['@nestjs', 'class-validator', 'class-transformer', 'reflect-metadata', 'rxjs', '@opentelemetry']) {
      expect([absent, existsSync(join(modules, absent))]).toEqual([absent, false]);
    }
  });

  it('runs a two-step workflow through nestjs-redflow/core, with no Nest installed', () => {
    const prefix = `pack-${process.pid}-${Date.now()}`;
    writeFileSync(
      join(dir, 'app', 'main.js'),
      `
const { createAdmin, createClient, startWorker, WorkflowRegistry } = require('nestjs-redflow/core');
async function main() {
  const registry = new WorkflowRegistry();
  const greet = registry.define('greet', {}, async ({ input, step }) => {
    const name = await step.run('load', () => input.name.toUpperCase());
    return step.run('compose', () => 'Hello ' + name);
  });
  const client = createClient({ url: process.env.REDIS_URL, prefix: ${JSON.stringify(prefix)}, registry });
  const worker = await startWorker({ app: 'pack-test', client, registry, concurrency: 2 });
  try {
    const handle = await client.start(greet, { name: 'ada' });
    const output = await handle.result({ timeoutMs: 10000 });
    const steps = (await client.getRunSteps(handle.id)).map((s) => s.name + ':' + s.status);
    console.log(JSON.stringify({ output, steps }));
  } finally {
    await worker.stop();
    await createAdmin(client).resetState();
    await client.close();
  }
}
main().catch((error) => { console.error(error); process.exit(1); });
`,
    );
    const out = execFileSync('node', ['main.js'], {
      cwd: join(dir, 'app'),
      encoding: 'utf8',
      env: { ...process.env, REDIS_URL: process.env.REDFLOW_TEST_REDIS_URL },
      timeout: 30_000,
    });
    expect(JSON.parse(out.trim())).toEqual({ output: 'Hello ADA', steps: ['load:succeeded', 'compose:succeeded'] });
  });

  it('nestjs-redflow/core/testing gives a test its own prefix and workers, and deletes its keys on close, with no Nest installed', () => {
    const script = `
const { createTestEngine } = require('nestjs-redflow/core/testing');
async function main() {
  const engine = createTestEngine({ url: process.env.REDIS_URL });
  const double = engine.define('double', {}, async ({ input, step }) => step.run('times-two', () => input.n * 2));
  await engine.worker();
  const handle = await engine.client.start(double, { n: 21 });
  const output = await handle.result({ timeoutMs: 10000 });
  const before = (await engine.redis.keys('{' + engine.prefix + '}:*')).length;
  await engine.close();
  const Redis = require('ioredis').Redis;
  const check = new Redis(process.env.REDIS_URL);
  const after = (await check.keys('{' + engine.prefix + '}:*')).length;
  await check.quit();
  console.log(JSON.stringify({ output, prefixed: engine.prefix.startsWith('test:'), before: before > 0, after }));
}
main().catch((error) => { console.error(error); process.exit(1); });
`;
    const out = execFileSync('node', ['-e', script], {
      cwd: join(dir, 'app'),
      encoding: 'utf8',
      env: { ...process.env, REDIS_URL: process.env.REDFLOW_TEST_REDIS_URL },
      timeout: 30_000,
    });
    expect(JSON.parse(out.trim())).toEqual({ output: 42, prefixed: true, before: true, after: 0 });
  });

  it('a DTO class as input schema without class-validator installed: a ConfigurationError saying what to install', () => {
    const script = `
const { createClient, WorkflowRegistry } = require('nestjs-redflow/core');
class SignupDto {}
const registry = new WorkflowRegistry();
const signup = registry.define('signup', { schema: SignupDto }, ({ input }) => input);
const client = createClient({ url: process.env.REDIS_URL, prefix: 'pack-dto-${process.pid}', registry });
client.start(signup, { email: 'a@example.com' }).then(
  () => { console.log('started'); return client.close(); },
  (error) => { console.log(JSON.stringify({ name: error.name, message: error.message })); return client.close(); },
);
`;
    const out = execFileSync('node', ['-e', script], {
      cwd: join(dir, 'app'),
      encoding: 'utf8',
      env: { ...process.env, REDIS_URL: process.env.REDFLOW_TEST_REDIS_URL },
      timeout: 30_000,
    });
    expect(JSON.parse(out.trim())).toEqual({
      name: 'ConfigurationError',
      message:
        'Workflow "signup" validates its input with the DTO class SignupDto, which needs class-validator and class-transformer: run "npm install class-validator class-transformer", or give a Standard Schema validator (zod, valibot, arktype) as its schema instead.',
    });
  });

  it('nestjs-redflow/otel without @opentelemetry/api installed: a ConfigurationError saying what to install', () => {
    const script = `
try {
  require('nestjs-redflow/otel').redflowTracing();
  console.log('loaded');
} catch (error) {
  console.log(JSON.stringify({ name: error.name, message: error.message }));
}
`;
    const out = execFileSync('node', ['-e', script], { cwd: join(dir, 'app'), encoding: 'utf8', timeout: 30_000 });
    expect(existsSync(join(dir, 'app', 'node_modules', '@opentelemetry'))).toBe(false);
    expect(JSON.parse(out.trim())).toEqual({
      name: 'ConfigurationError',
      message:
        'redflowTracing() of "nestjs-redflow/otel" needs the package @opentelemetry/api: run "npm install @opentelemetry/api" (and an OpenTelemetry SDK to export the spans).',
    });
  });

  it('the root entry point needs Nest, and says which package is missing', () => {
    let message = '';
    try {
      execFileSync('node', ['-e', "require('nestjs-redflow')"], { cwd: join(dir, 'app'), encoding: 'utf8', stdio: 'pipe' });
    } catch (error) {
      message = String((error as { stderr?: string }).stderr);
    }
    expect(message).toMatch(/Cannot find module '(@nestjs\/common|reflect-metadata)'/);
  });

  it('only nestjs-redflow/microservice names @nestjs/microservices, in its JavaScript and its types', () => {
    const dist = join(dir, 'app', 'node_modules', 'nestjs-redflow', 'dist');
    const files = (readdirSync(dist, { recursive: true }) as string[]).filter((file) => file.endsWith('.js') || file.endsWith('.d.ts'));
    const naming = files.filter((file) => /(require\(|from )["']@nestjs\/microservices["']/.test(readFileSync(join(dist, file), 'utf8')));
    expect(naming).toEqual([join('microservice', 'redflow.server.d.ts')]);
    expect(existsSync(join(dist, 'microservice', 'index.js'))).toBe(true);
  });

  it('nestjs-redflow/core/metrics without prom-client, nestjs-redflow/health without @nestjs/terminus: a ConfigurationError saying what to install; the new entry points are in the package', () => {
    const script = `
try {
  require('nestjs-redflow/core/metrics');
  console.log('loaded');
} catch (error) {
  console.log(JSON.stringify({ name: error.name, message: error.message }));
}
`;
    const out = execFileSync('node', ['-e', script], { cwd: join(dir, 'app'), encoding: 'utf8' });
    expect(JSON.parse(out.trim())).toEqual({
      name: 'ConfigurationError',
      message: 'nestjs-redflow/metrics needs the optional peer prom-client: run "npm install prom-client".',
    });
    const health = execFileSync('node', ['-e', script.replace("'nestjs-redflow/core/metrics'", "'nestjs-redflow/health'")], {
      cwd: join(dir, 'app'),
      encoding: 'utf8',
    });
    expect(JSON.parse(health.trim())).toEqual({
      name: 'ConfigurationError',
      message: 'nestjs-redflow/health needs the optional peer @nestjs/terminus: run "npm install @nestjs/terminus".',
    });
    const exported = JSON.parse(readFileSync(join(dir, 'app', 'node_modules', 'nestjs-redflow', 'package.json'), 'utf8')) as {
      exports: Record<string, { types: string; default: string }>;
    };
    for (const entry of ['./health', './metrics', './core/metrics']) {
      for (const file of Object.values(exported.exports[entry]))
        expect([entry, existsSync(join(dir, 'app', 'node_modules', 'nestjs-redflow', file))]).toEqual([entry, true]);
    }
  });

  it('ships source maps with their sources inlined, and no TypeScript sources', () => {
    const core = join(dir, 'app', 'node_modules', 'nestjs-redflow', 'dist', 'core');
    const map = JSON.parse(readFileSync(join(core, 'index.js.map'), 'utf8')) as { sourcesContent?: string[] };
    expect(map.sourcesContent?.[0]).toContain("export * from './errors'");
    const listed = readdirSync(core, { recursive: true }) as string[];
    expect(listed.filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))).toEqual([]);
    expect(listed.some((file) => file.endsWith('.lua'))).toBe(true);
  });

  it('package.json: each typed subpath of exports has the same declarations in typesVersions (for moduleResolution node10), and sideEffects names shipped files', () => {
    const installed = join(dir, 'app', 'node_modules', 'nestjs-redflow');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      exports: Record<string, string | { types?: string }>;
      typesVersions: { '*': Record<string, string[]> };
      sideEffects: string[];
    };
    const fromExports = Object.entries(manifest.exports)
      .filter(([subpath, target]) => subpath !== '.' && typeof target === 'object' && target.types)
      .map(([subpath, target]) => [subpath.slice(2), [(target as { types: string }).types]]);
    expect(Object.fromEntries(fromExports)).toEqual(manifest.typesVersions['*']);
    expect(manifest.sideEffects.length).toBeGreaterThan(0);
    for (const file of manifest.sideEffects) expect([file, existsSync(join(installed, file))]).toEqual([file, true]);
    expect(readFileSync(join(installed, 'dist', 'nest', 'index.js'), 'utf8')).toContain('require("reflect-metadata")');
  });

  it('every source map in the package carries the text of each source it names (the .ts files are not shipped)', () => {
    const dist = join(dir, 'app', 'node_modules', 'nestjs-redflow', 'dist');
    const maps = (readdirSync(dist, { recursive: true }) as string[]).filter((file) => file.endsWith('.map'));
    expect(maps.length).toBeGreaterThan(50);
    const incomplete = maps.filter((file) => {
      const map = JSON.parse(readFileSync(join(dist, file), 'utf8')) as { sources: string[]; sourcesContent?: Array<string | null> };
      return (
        map.sources.length === 0 ||
        map.sourcesContent?.length !== map.sources.length ||
        map.sourcesContent.some((text) => typeof text !== 'string' || text.length === 0)
      );
    });
    expect(incomplete).toEqual([]);
    expect(maps.some((file) => file.endsWith('.d.ts.map'))).toBe(false);
  });
});
