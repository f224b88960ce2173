import { availableParallelism } from 'node:os';
import { Worker as Thread } from 'node:worker_threads';

import type { SandboxStepContext } from '../definition/step-types';
import { ConfigurationError } from '../errors';
import { deserializeError } from '../store/serialization';

/**
 * `step.run({ sandbox: true }, fn)`: the step's function runs in a thread of a `worker_threads`
 * pool, so a step that keeps the CPU busy for seconds does not stall the worker's event loop (its
 * heartbeats, claims and other runs). The function is rebuilt in the thread from its source text:
 * it may use only its argument and what it imports itself (`await import('node:crypto')`, or
 * `require`), never variables of the code around it. It gets `{ runId, workflow, step, attempt,
 * idempotencyKey }`, and what it returns crosses back by structured clone; an error crosses back
 * with its name, message, stack and own fields. When the step is stopped (its `timeout`, a cancel,
 * the run's timeout) the thread is terminated, and the pool makes a new one for the next step.
 */

/** What a sandboxed step function gets, cloned into the thread (which adds `require`). */
export type SandboxContext = Omit<SandboxStepContext, 'require'>;

/** The thread's code: runs each function it is sent, one at a time, and posts back its outcome. */
const THREAD_SOURCE = `
const { parentPort } = require('node:worker_threads');
const cloneable = (value) => { try { structuredClone(value); return true; } catch { return false; } };
parentPort.on('message', async ({ source, context, args }) => {
  try {
    const fn = (0, eval)(source);
    const value = await (args ? fn(...args) : fn({ ...context, require }));
    parentPort.postMessage({ ok: true, value });
  } catch (thrown) {
    const error = thrown instanceof Error ? thrown : new Error(String(thrown));
    const fields = {};
    for (const key of Object.keys(error)) if (cloneable(error[key])) fields[key] = error[key];
    parentPort.postMessage({ ok: false, error: { name: error.name, message: error.message, stack: error.stack, fields } });
  }
});
`;

/**
 * The expression that rebuilds `fn` in a thread: its source as written for a function or an arrow
 * function, wrapped for a method (`hash(input) { ... }`). `ConfigurationError` for a function that
 * has no source to rebuild (bound, native, a class).
 */
export function sandboxSource(fn: unknown, what: string): string {
  if (typeof fn !== 'function') throw new ConfigurationError(`${what} must be a function, got ${typeof fn}.`);
  const text = Function.prototype.toString.call(fn);
  if (/\{\s*\[native code\]\s*\}\s*$/.test(text) || /^class\b/.test(text)) {
    throw new ConfigurationError(
      `${what} cannot run in the sandbox: it is a bound, native or class function, whose source cannot be rebuilt in a thread. Pass a plain function.`,
    );
  }
  for (const candidate of [`(${text})`, `(({ ${text} })[${JSON.stringify(fn.name)}])`]) {
    try {
      new Function(`return ${candidate};`);
      return candidate;
    } catch {
      // Not this form: a method's source is not an expression by itself.
    }
  }
  throw new ConfigurationError(`${what} cannot run in the sandbox: its source could not be rebuilt as a function.`);
}

/**
 * A step function that stands for a method called with arguments (`@Step({ sandbox: true })`):
 * the sandbox runs `fn` with `args` in the thread instead of the step function itself.
 */
export const SANDBOX_CALL = Symbol.for('nestjs-redflow.sandboxCall');

/** What `SANDBOX_CALL` holds. */
export interface SandboxCall {
  fn: (...args: never[]) => unknown;
  args: unknown[];
}

interface Task {
  source: string;
  context: SandboxContext;
  args?: unknown[];
  signal: AbortSignal;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** A pool of threads, each running one sandboxed step at a time; more steps wait for a free thread. */
export class SandboxPool {
  private readonly idle: Thread[] = [];
  private readonly waiting: Task[] = [];
  private busy = 0;

  constructor(readonly size: number) {}

  /** Runs `source` (from `sandboxSource`) in a thread; rejects with `signal.reason` when it aborts (the thread is terminated). */
  run(source: string, context: SandboxContext, signal: AbortSignal, args?: unknown[]): Promise<unknown> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      this.waiting.push({ source, context, args, signal, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    while (this.waiting.length && this.busy < this.size) {
      const task = this.waiting.shift()!;
      if (task.signal.aborted) {
        task.reject(task.signal.reason);
        continue;
      }
      this.busy++;
      this.start(this.idle.pop() ?? this.spawn(), task);
    }
  }

  private spawn(): Thread {
    const thread = new Thread(THREAD_SOURCE, { eval: true });
    // An idle thread must not keep the process alive.
    thread.unref();
    return thread;
  }

  private start(thread: Thread, task: Task): void {
    let settled = false;
    const done = (keep: boolean) => {
      settled = true;
      task.signal.removeEventListener('abort', onAbort);
      thread.off('message', onMessage);
      thread.off('error', onError);
      thread.off('exit', onExit);
      this.busy--;
      if (keep) this.idle.push(thread);
      else void thread.terminate();
      this.next();
    };
    const onMessage = (reply: { ok: boolean; value?: unknown; error?: Record<string, unknown> }) => {
      done(true);
      if (reply.ok) task.resolve(reply.value);
      else task.reject(deserializeError(JSON.stringify(reply.error)));
    };
    const onError = (error: unknown) => {
      if (settled) return;
      done(false);
      task.reject(error);
    };
    const onExit = (code: number) =>
      onError(new Error(`The sandbox thread of step "${task.context.step}" exited (code ${code}) before its function returned.`));
    const onAbort = () => {
      if (settled) return;
      done(false);
      task.reject(task.signal.reason);
    };
    thread.on('message', onMessage);
    thread.on('error', onError);
    thread.on('exit', onExit);
    task.signal.addEventListener('abort', onAbort, { once: true });
    thread.ref();
    try {
      thread.postMessage({ source: task.source, context: task.context, args: task.args });
    } catch (error) {
      // Arguments that cannot be cloned into the thread (functions, class instances with methods used).
      done(true);
      thread.unref();
      task.reject(
        new ConfigurationError(
          `The arguments of sandboxed step "${task.context.step}" cannot be copied into its thread: ${(error as Error).message}. Pass plain data.`,
        ),
      );
      return;
    }
    // Idle again: unref'd once it answers (see spawn).
    thread.once('message', () => thread.unref());
  }
}

let shared: SandboxPool | undefined;

/** The process's pool: one thread per CPU but one, at least one. */
export function sandboxPool(): SandboxPool {
  return (shared ??= new SandboxPool(Math.max(1, availableParallelism() - 1)));
}
