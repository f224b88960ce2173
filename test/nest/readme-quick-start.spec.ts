import { createAdmin } from '../../lib';

import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import type { INestApplication, Type } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import request from 'supertest';
import type { App } from 'supertest/types';

import { RedflowClient, type RunState, type StepState } from '../../lib';
import { RedflowOrchestrator } from '../../lib/nest/redflow.orchestrator';
import { extractSnippets, SNIPPET_DIR, snippetRoot } from '../support/readme-snippets';

/**
 * README's quick start, run: its src/ files are copied from README.md as written (only
 * `'nestjs-redflow'` points at lib/), and its AppModule is started the way its main.ts starts it,
 * on the test Redis with a prefix of its own, then driven over HTTP. The getting-started guide shows
 * the same four files: they must stay the same as README's.
 */

const GUIDE = 'docs/guide/getting-started.md';

/** The `src/` files of a markdown file's quick start: name → code. */
function quickStartFiles(source: string): Record<string, string> {
  const { snippets } = extractSnippets(readFileSync(join(ROOT, source), 'utf8'), source);
  const files = snippets.map((s) => [relative(snippetRoot(source), s.file), s.code] as const).filter(([name]) => name.startsWith('src/'));
  return Object.fromEntries(files);
}

const ROOT = join(__dirname, '..', '..');
const dir = join(ROOT, 'test', `.quick-start-${process.pid}-${randomBytes(3).toString('hex')}`);

type RunView = Pick<RunState, 'id' | 'status' | 'output'> & { createdAt: string; steps: Array<Pick<StepState, 'name' | 'status'>> } & Record<string, unknown>;

describe("README's quick start, run as written", () => {
  const saved = { REDIS_URL: process.env.REDIS_URL, REDFLOW_PREFIX: process.env.REDFLOW_PREFIX };
  let app: INestApplication<App> | undefined;
  const files: string[] = [];

  beforeAll(async () => {
    const url = process.env.REDFLOW_TEST_REDIS_URL;
    if (!url) throw new Error('The jest global setup did not start Redis: run the tests with jest.');
    const { snippets } = extractSnippets(readFileSync(join(ROOT, 'README.md'), 'utf8'));
    for (const snippet of snippets.filter((s) => relative(SNIPPET_DIR, s.file).startsWith('src/'))) {
      const file = join(dir, relative(SNIPPET_DIR, snippet.file));
      mkdirSync(dirname(file), { recursive: true });
      const lib = relative(dirname(file), join(ROOT, 'lib'));
      writeFileSync(file, snippet.code.replace(/from 'nestjs-redflow'/g, `from '${lib}'`));
      files.push(relative(dir, file));
    }
    // The module reads REDIS_URL (and the default prefix REDFLOW_PREFIX) when it is imported.
    process.env.REDIS_URL = url;
    process.env.REDFLOW_PREFIX = `test:quick-start:${randomBytes(5).toString('hex')}`;
    const { AppModule } = require(join(dir, 'src', 'app.module.ts')) as { AppModule: Type };
    // As src/main.ts does, on a free port.
    app = await NestFactory.create<INestApplication<App>>(AppModule, { logger: ['error', 'warn'] });
    app.enableShutdownHooks();
    await app.listen(0, '127.0.0.1');
  });

  afterAll(async () => {
    try {
      if (app) {
        await app.get(RedflowOrchestrator).stopWorker();
        await createAdmin(app.get(RedflowClient)).resetState();
        await app.close();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('has the four files of the quick start', () => {
    expect(files.sort()).toEqual(['src/app.module.ts', 'src/main.ts', 'src/welcome.controller.ts', 'src/welcome.workflows.ts']);
  });

  it(`shows the same four files in ${GUIDE}`, () => {
    expect(quickStartFiles(GUIDE)).toEqual(quickStartFiles('README.md'));
  });

  it('POST /welcome starts a run (once per email) that runs its steps, waits, and ends with their outputs', async () => {
    const http = () => request(app!.getHttpServer());
    const started = await http().post('/welcome').send({ email: 'ada@example.com' }).expect(201);
    const runId = (started.body as { runId: string }).runId;
    expect(typeof runId).toBe('string');
    // The idempotency key: the same email starts nothing new.
    expect((await http().post('/welcome').send({ email: 'ada@example.com' }).expect(201)).body).toEqual({ runId });

    const output = await app!.get(RedflowClient).waitForRun(runId, { timeoutMs: 15_000 });
    expect(output).toEqual({ accountId: 'acc_ada', messageId: 'msg_ada@example.com' });
    const view = (await http().get(`/welcome/${runId}`).expect(200)).body as RunView;
    // A projection: the status, the output and the steps' names and statuses; no input, no step output.
    expect(view).toEqual({
      id: runId,
      status: 'succeeded',
      createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      output,
      steps: [
        { name: 'create-account', status: 'succeeded' },
        { name: 'let-it-settle', status: 'succeeded' },
        { name: 'send-welcome-email', status: 'succeeded' },
      ],
    });
    await http().get('/welcome/no-such-run').expect(404);
  });
});
