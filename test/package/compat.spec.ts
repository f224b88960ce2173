import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Redis } from 'ioredis';

import { buildAndPack } from '../support/packed';

/**
 * The compatibility matrix: the packed package installed into two fresh Nest apps, each compiled by
 * its own TypeScript with `strict`, `skipLibCheck: false`, `isolatedModules` and decorator metadata,
 * then started with `node dist/main.js` and driven over HTTP through a two-step workflow.
 *
 *   A: Nest 11, CommonJS (module commonjs, moduleResolution node10), TypeScript 5.9
 *   B: Nest 12 (our own devDependencies), ESM ("type": "module", nodenext), TypeScript 6
 *
 * Neither app has @nestjs/microservices. Both installs run in parallel (npm's cache serves most of
 * them); the whole file takes about a minute.
 */

const ROOT = join(__dirname, '..', '..');
const clusterMode = process.env.REDFLOW_TEST_CLUSTER === '1';
const run = promisify(execFile);
const own = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { devDependencies: Record<string, string> };

interface AppSpec {
  key: 'a' | 'b';
  title: string;
  nestMajor: string;
  typescriptMinor: string;
  packageJson: Record<string, unknown>;
  compilerOptions: Record<string, unknown>;
  dependencies: string[];
  /** What relative imports end with: nothing in the CommonJS app, ".js" under nodenext. */
  ext: string;
}

const COMMON_OPTIONS = {
  target: 'ES2022',
  outDir: 'dist',
  rootDir: 'src',
  strict: true,
  skipLibCheck: false,
  isolatedModules: true,
  emitDecoratorMetadata: true,
  experimentalDecorators: true,
  esModuleInterop: true,
  types: ['node'],
};

const APPS: AppSpec[] = [
  {
    key: 'a',
    title: 'app A: Nest 11, CommonJS, TypeScript 5.9',
    nestMajor: '11',
    typescriptMinor: '5.9',
    packageJson: { name: 'compat-app-a', version: '1.0.0', private: true },
    compilerOptions: { ...COMMON_OPTIONS, module: 'commonjs', moduleResolution: 'node10' },
    dependencies: ['@nestjs/common@^11', '@nestjs/core@^11', '@nestjs/platform-express@^11', 'typescript@~5.9'],
    ext: '',
  },
  {
    key: 'b',
    title: 'app B: Nest 12, ESM, TypeScript 6',
    nestMajor: '12',
    typescriptMinor: '6.0',
    packageJson: { name: 'compat-app-b', version: '1.0.0', private: true, type: 'module' },
    compilerOptions: { ...COMMON_OPTIONS, module: 'nodenext', moduleResolution: 'nodenext' },
    dependencies: [
      `@nestjs/common@${own.devDependencies['@nestjs/common']}`,
      `@nestjs/core@${own.devDependencies['@nestjs/core']}`,
      `@nestjs/platform-express@${own.devDependencies['@nestjs/platform-express']}`,
      `typescript@${own.devDependencies.typescript}`,
    ],
    ext: '.js',
  },
];

/** What every Nest app has besides Nest itself. */
const APP_DEPENDENCIES = ['reflect-metadata@^0.2', 'rxjs@^7.8', 'class-validator@^0.14', 'class-transformer@^0.5', '@types/node@^20'];

/** The app's sources: a workflow provider with two steps, a controller, the module and main.ts. */
function sources(app: AppSpec): Record<string, string> {
  const ext = app.ext;
  return {
    'greet.dto.ts': `import { IsString, MinLength } from 'class-validator';

export class GreetDto {
  @IsString()
  @MinLength(1)
  name!: string;
}
`,
    'greeting.workflows.ts': `import { Injectable } from '@nestjs/common';
import { Step, Workflow } from 'nestjs-redflow';
import type { WorkflowContext } from 'nestjs-redflow';
import { GreetDto } from './greet.dto${ext}';

@Injectable()
export class GreetingWorkflows {
  @Workflow({ name: 'greet', input: GreetDto })
  async greet({ input }: WorkflowContext<GreetDto>): Promise<{ greeting: string; steps: number }> {
    const name = await this.normalize(input.name);
    const greeting = await this.compose(name);
    return { greeting, steps: 2 };
  }

  @Step('normalize')
  async normalize(name: string): Promise<string> {
    return name.trim().toUpperCase();
  }

  @Step('compose')
  async compose(name: string): Promise<string> {
    return 'Hello, ' + name + ' (${app.key})';
  }
}
`,
    'greetings.controller.ts': `import { Body, Controller, Get, NotFoundException, Param, Post } from '@nestjs/common';
import { RedflowClient } from 'nestjs-redflow';
import { GreetDto } from './greet.dto${ext}';
import { GreetingWorkflows } from './greeting.workflows${ext}';

@Controller('greetings')
export class GreetingsController {
  constructor(private readonly redflow: RedflowClient) {}

  @Post()
  async start(@Body() body: GreetDto): Promise<{ id: string }> {
    const run = await this.redflow.run(GreetingWorkflows, 'greet', body);
    return { id: run.id };
  }

  @Get(':id')
  async get(@Param('id') id: string) {
    const run = await this.redflow.getRun(id);
    if (!run) throw new NotFoundException('Run ' + id + ' does not exist.');
    return { status: run.status, output: run.output, steps: (await this.redflow.getRunSteps(id)).map((step) => step.name + ':' + step.status) };
  }
}
`,
    'app.module.ts': `import { Module } from '@nestjs/common';
import { RedflowModule } from 'nestjs-redflow';
import { GreetingsController } from './greetings.controller${ext}';
import { GreetingWorkflows } from './greeting.workflows${ext}';

@Module({
  imports: [RedflowModule.forRoot({ app: 'compat-${app.key}', connection: process.env.REDIS_URL, prefix: process.env.REDFLOW_PREFIX })],
  controllers: [GreetingsController],
  providers: [GreetingWorkflows],
})
export class AppModule {}
`,
    'main.ts': `import 'reflect-metadata';
import { NestFactory } from '@nestjs/core';
import type { AddressInfo } from 'node:net';
import { AppModule } from './app.module${ext}';

async function bootstrap(): Promise<void> {
  const app = await NestFactory.create(AppModule, { logger: ['error', 'warn'] });
  app.enableShutdownHooks();
  await app.listen(0, '127.0.0.1');
  const address = app.getHttpServer().address() as AddressInfo;
  console.log('listening on ' + address.port);
}

void bootstrap();
`,
  };
}

function writeApp(dir: string, app: AppSpec): void {
  mkdirSync(join(dir, 'src'), { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify(app.packageJson, null, 2));
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: app.compilerOptions, include: ['src'] }, null, 2));
  for (const [file, text] of Object.entries(sources(app))) writeFileSync(join(dir, 'src', file), text);
}

/** `tsc -p .` in the app: its diagnostics, one per line (empty when it compiled cleanly). */
async function compile(dir: string): Promise<string[]> {
  try {
    await run(join(dir, 'node_modules', '.bin', 'tsc'), ['-p', '.', '--pretty', 'false'], { cwd: dir });
    return [];
  } catch (error) {
    const output = String((error as { stdout?: string }).stdout ?? '') + String((error as { stderr?: string }).stderr ?? '');
    return output.split('\n').filter((line) => /error TS\d+/.test(line));
  }
}

/** Starts `node dist/main.js` and resolves with its port once it prints it. */
function start(dir: string, prefix: string): Promise<{ child: ChildProcess; port: number; output: () => string }> {
  const child = spawn(process.execPath, ['dist/main.js'], {
    cwd: dir,
    env: { ...process.env, REDIS_URL: process.env.REDFLOW_TEST_REDIS_URL, REDFLOW_PREFIX: prefix },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let text = '';
  const output = () => text;
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`The app did not print its port within 20 s:\n${text}`)), 20_000);
    const onData = (chunk: Buffer) => {
      text += chunk.toString();
      const match = /listening on (\d+)/.exec(text);
      if (match) {
        clearTimeout(timer);
        resolve({ child, port: Number(match[1]), output });
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`The app exited (code ${code}, signal ${signal}) before listening:\n${text}`));
    });
  });
}

function stop(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve({ code: child.exitCode, signal: child.signalCode });
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.kill('SIGTERM');
  });
}

async function deleteKeys(prefix: string): Promise<void> {
  const redis = new Redis(process.env.REDFLOW_TEST_REDIS_URL as string);
  try {
    const keys = await redis.keys(`{${prefix}}:*`);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    redis.disconnect();
  }
}

(clusterMode ? describe.skip : describe)('the packed package in fresh Nest apps (compatibility matrix)', () => {
  let dir: string;
  const installed: Record<string, Promise<void>> = {};

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'redflow-compat-'));
    const tarball = await buildAndPack(dir);
    for (const app of APPS) {
      const appDir = join(dir, app.key);
      writeApp(appDir, app);
      installed[app.key] = run(
        'npm',
        ['install', tarball, ...app.dependencies, ...APP_DEPENDENCIES, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'],
        {
          cwd: appDir,
        },
      ).then(() => undefined);
    }
    // Both installs run at once; each app's tests report its own failure.
    await Promise.allSettled(Object.values(installed));
  }, 150_000);

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe.each(APPS)('$title', (app) => {
    const appDir = () => join(dir, app.key);
    const prefix = `compat-${app.key}-${process.pid}-${Date.now()}`;
    let diagnostics: string[] | undefined;
    const compiled = async () => {
      await installed[app.key];
      diagnostics ??= await compile(appDir());
      return diagnostics;
    };

    afterAll(() => deleteKeys(prefix));

    it(`installs Nest ${app.nestMajor} and TypeScript ${app.typescriptMinor}, without @nestjs/microservices`, async () => {
      await installed[app.key];
      const version = (name: string) => (JSON.parse(readFileSync(join(appDir(), 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
      expect(version('@nestjs/core').split('.')[0]).toBe(app.nestMajor);
      expect(version('@nestjs/common').split('.')[0]).toBe(app.nestMajor);
      expect(version('typescript')).toMatch(new RegExp(`^${app.typescriptMinor.replace('.', '\\.')}\\.`));
      expect(existsSync(join(appDir(), 'node_modules', 'nestjs-redflow', 'dist', 'index.js'))).toBe(true);
      expect(existsSync(join(appDir(), 'node_modules', '@nestjs', 'microservices'))).toBe(false);
    }, 60_000);

    it('tsc compiles the app with strict, skipLibCheck false and isolatedModules: zero errors', async () => {
      expect(await compiled()).toEqual([]);
    }, 60_000);

    it('node dist/main.js serves the app: a POST starts the workflow, GET polls it to succeeded with both steps, SIGTERM stops it', async () => {
      await compiled();
      expect(existsSync(join(appDir(), 'dist', 'main.js'))).toBe(true);
      const { child, port, output } = await start(appDir(), prefix);
      try {
        const base = `http://127.0.0.1:${port}/greetings`;
        const started = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: ' ada ' }) });
        expect(started.status).toBe(201);
        const { id } = (await started.json()) as { id: string };
        expect(typeof id).toBe('string');

        let run: { status: string; output?: unknown; steps: string[] } = { status: 'none', steps: [] };
        const deadline = Date.now() + 15_000;
        while (Date.now() < deadline) {
          const answer = await fetch(`${base}/${encodeURIComponent(id)}`);
          expect(answer.status).toBe(200);
          run = (await answer.json()) as typeof run;
          if (run.status !== 'queued' && run.status !== 'running') break;
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        expect(run).toEqual({
          status: 'succeeded',
          output: { greeting: `Hello, ADA (${app.key})`, steps: 2 },
          steps: ['normalize:succeeded', 'compose:succeeded'],
        });

        // The workflow's DTO is checked by class-validator inside the app: a bad input is refused.
        const refused = await fetch(base, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 42 }) });
        expect(refused.status).toBe(400);
      } finally {
        // Nest's shutdown hooks close the app, then re-raise SIGTERM: a clean stop ends by that signal (or code 0).
        const exit = await stop(child);
        expect({ stoppedCleanly: exit.signal === 'SIGTERM' || exit.code === 0, exit, output: output() }).toMatchObject({ stoppedCleanly: true });
      }
    }, 60_000);
  });
});
