import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';

import { eventually } from './engine';

const ROOT = join(__dirname, '..', '..');

/** A worker running a fixture in a child process, on the test Redis. */
export interface WorkerProcess {
  proc: ChildProcess;
  /** Resolves when the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** What it wrote to stderr so far. */
  stderr: string;
}

/**
 * Starts `node -r @swc-node/register <fixture>` with the test Redis's address (standalone or
 * cluster) and `env`. Its stdout is ignored; stdin is a pipe when asked (closing it stops
 * fixtures that watch it).
 */
export function spawnWorkerProcess(fixture: string, env: Record<string, string>, stdin: 'ignore' | 'pipe' = 'ignore'): WorkerProcess {
  const childEnv: NodeJS.ProcessEnv = { ...process.env, ...env };
  delete childEnv.REDFLOW_TEST_REDIS_URL;
  delete childEnv.REDFLOW_TEST_CLUSTER_NODES;
  if (process.env.REDFLOW_TEST_CLUSTER_NODES) childEnv.REDFLOW_TEST_CLUSTER_NODES = process.env.REDFLOW_TEST_CLUSTER_NODES;
  else childEnv.REDFLOW_TEST_REDIS_URL = process.env.REDFLOW_TEST_REDIS_URL;
  const proc = spawn(process.execPath, ['-r', '@swc-node/register', fixture], { cwd: ROOT, env: childEnv, stdio: [stdin, 'ignore', 'pipe'] });
  const child: WorkerProcess = { proc, exited: undefined as never, stderr: '' };
  proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => (child.stderr += chunk));
  child.exited = new Promise((resolve) => {
    proc.once('exit', (code, signal) => resolve({ code, signal }));
    proc.once('error', (error) => {
      child.stderr += `spawn failed: ${error.message}\n`;
      resolve({ code: null, signal: null });
    });
  });
  return child;
}

/** SIGKILLs the process if it still runs, and waits for it to exit. */
export async function killWorkerProcess(child: WorkerProcess | undefined): Promise<void> {
  if (!child) return;
  if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
  await child.exited;
}

/** Polls `check` while every child runs; fails at once, with its stderr, if one exited. */
export function whileAlive(children: WorkerProcess[], what: string, check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  return eventually(async () => {
    for (const c of children) {
      if (c.proc.exitCode !== null || c.proc.signalCode !== null) {
        throw new Error(`${what} exited early (code ${c.proc.exitCode}, signal ${c.proc.signalCode}):\n${c.stderr}`);
      }
    }
    return check();
  }, timeoutMs);
}
