import { TimeoutError, type Duration, type RunHandle, type RunState, type RunStatus, type StepState, type StoredError, type WorkflowClient } from '../core';
import { renamedDuration } from '../core/definition/option-checks';
import { TERMINAL_STATUSES } from '../core/definition/run-types';
import type { StepMock, StepMocks } from '../core/worker/step-runtime';
import type { VirtualClock } from './virtual-clock';

/**
 * A mocked step of `engine.run()`: the step's function is not called; `output` is its result, or
 * `error` (an Error or a message) is thrown from it, through the step's normal retry path.
 */
export type StepMockOf<T = unknown> = { output: T } | { error: Error | string };

/** Options of `engine.run()`. */
export interface TestRunOptions {
  /** Steps to mock, by step name. */
  steps?: Record<string, StepMockOf>;
  /** How long to wait for the run to end or wait, in real time. @default '5s' */
  timeout?: Duration;
  /** @deprecated Use `timeout` (a duration such as `'5s'`, or ms); it goes in the next minor version. */
  timeoutMs?: number;
}

/** Options of `runUntilWaiting`. */
export type WaitOptions = Pick<TestRunOptions, 'timeout' | 'timeoutMs'>;

/**
 * Where a run stands when `run()` or `runUntilWaiting()` resolves. `status` is the stored status,
 * except that a suspended run (waiting for a time, a signal, an event, or a retry delay; or for a
 * child run that itself waits) is `'waiting'`. A child run that is queued or running is work still
 * going on: `runUntilWaiting` waits for it.
 */
export interface TestRunResult<TOutput = unknown> {
  runId: string;
  status: Exclude<RunStatus, 'scheduled'> | 'waiting';
  output?: TOutput;
  error?: StoredError;
  /** The run's step records, as `client.getRunSteps` returns them. */
  steps: StepState[];
  /** The steps that wait (pending `waitFor`, signals, events, child runs). */
  waits: StepState[];
  /** The run as `client.getRun` returns it. */
  state: RunState<TOutput>;
}

const DEFAULT_TIMEOUT_MS = 5_000;

/**
 * What `createTestEngine()` and `RedflowTesting` share: starting a run with its steps mocked, and
 * waiting until it ends or waits. The worker consults `stepMocks` before calling a step function.
 */
export class TestRunner {
  private readonly mocks = new Map<string, Record<string, StepMockOf>>();
  private readonly starting = new Set<Promise<unknown>>();

  constructor(
    private readonly client: WorkflowClient,
    private readonly clock: VirtualClock,
  ) {}

  /** The worker's step-mock hook. */
  readonly stepMocks: StepMocks = async (runId, name): Promise<StepMock | undefined> => {
    // A run started by run() may reach its first step before run() has stored its mocks.
    if (this.starting.size) await Promise.allSettled([...this.starting]);
    const mock = this.mocks.get(runId)?.[name];
    if (!mock) return undefined;
    return 'output' in mock ? { output: mock.output } : { error: typeof mock.error === 'string' ? new Error(mock.error) : mock.error };
  };

  /** Starts a run with `start`, stores its step mocks, and waits until it ends or waits. */
  async run<TOutput>(start: () => Promise<RunHandle<unknown>>, options: TestRunOptions = {}): Promise<TestRunResult<TOutput>> {
    const started = start();
    this.starting.add(started);
    let runId: string;
    try {
      runId = (await started).id;
      if (options.steps) this.mocks.set(runId, options.steps);
    } finally {
      this.starting.delete(started);
    }
    return this.runUntilWaiting<TOutput>(runId, { timeout: options.timeout, timeoutMs: options.timeoutMs });
  }

  /** Resolves when the run has ended or waits; `TimeoutError` after `timeout` (real time). */
  async runUntilWaiting<TOutput = unknown>(runId: string, options: WaitOptions = {}): Promise<TestRunResult<TOutput>> {
    const timeoutMs =
      renamedDuration(options, { name: 'timeout', deprecated: 'timeoutMs', label: (key) => `runUntilWaiting option ${key}`, timer: true }) ??
      DEFAULT_TIMEOUT_MS;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const state = await this.client.getRun<TOutput>(runId);
      if (state) {
        const result = await this.settled(state, await this.client.getRunSteps(runId));
        if (result) return result;
      }
      if (Date.now() > deadline) throw new TimeoutError(`Waiting for run "${runId}" to end or wait (last status: ${state?.status ?? 'missing'})`, timeoutMs);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** The result when the run ended or waits, else undefined. */
  private async settled<TOutput>(state: RunState<TOutput>, steps: StepState[], depth = 0): Promise<TestRunResult<TOutput> | undefined> {
    const now = this.clock.now();
    const waits = steps.filter((s) => s.status === 'waiting');
    const base = {
      runId: state.id,
      steps,
      waits,
      state,
      ...(state.output !== undefined ? { output: state.output } : {}),
      ...(state.error ? { error: state.error } : {}),
    };
    if (TERMINAL_STATUSES.has(state.status)) return { ...base, status: state.status as TestRunResult['status'] };
    if (state.status !== 'scheduled') return undefined;
    // Scheduled but already due: a worker is about to promote it, it is not waiting.
    if (state.availableAt > now) return { ...base, status: 'waiting' };
    for (const wait of waits) {
      if (wait.childRunId === undefined) {
        if (wait.wakeAt === undefined || wait.wakeAt > now) return { ...base, status: 'waiting' };
      } else if (await this.childWaits(wait.childRunId, depth)) {
        // A child run only makes its parent wait when the child itself waits (for a time, a
        // signal, an event); a child that is running or queued is work still going on.
        return { ...base, status: 'waiting' };
      }
    }
    return undefined;
  }

  /** Whether a child run waits on something outside the test (or is gone). */
  private async childWaits(childRunId: string, depth: number): Promise<boolean> {
    if (depth >= 16) return true;
    const child = await this.client.getRun(childRunId);
    if (!child) return true;
    if (TERMINAL_STATUSES.has(child.status)) return false; // the parent is about to be woken
    const settled = await this.settled(child, await this.client.getRunSteps(childRunId), depth + 1);
    return settled?.status === 'waiting';
  }
}
