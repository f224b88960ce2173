import { NonDeterminismError, WorkflowRegistry, type StepApi, type WorkflowOptions } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * The non-determinism guard: a replay whose code reaches step names the journal contradicts
 * fails with NonDeterminismError before any new step's function runs; code that only reaches
 * the journal's steps in another interleaving (parallel branches) never fires it.
 */
describe('non-determinism guard', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  /** Calls of each step function, across every deploy of the test. */
  let calls: Record<string, number>;
  beforeEach(() => (calls = {}));
  const count = (name: string) => () => {
    calls[name] = (calls[name] ?? 0) + 1;
    return name;
  };

  /** A registry with `order` defined by `body` (steps before and after the "go" signal). */
  function deploy(body: (step: StepApi) => Promise<unknown>, options: WorkflowOptions = {}) {
    const registry = new WorkflowRegistry();
    // A step that throws fails its attempt at once: these tests replay run attempts, not step tries.
    const definition = registry.define('order', { maxAttempts: 3, stepRetries: { maxAttempts: 1 }, ...options }, ({ step }) => body(step));
    return { registry, definition };
  }

  /**
   * Runs `order` on the first deploy until it waits for "go", stops that worker, starts one with
   * the second deploy and sends "go": the second deploy replays the first one's journal.
   */
  async function redeploy(first: ReturnType<typeof deploy>, second: ReturnType<typeof deploy>) {
    const worker = await engine.worker({ app: 'shop', registry: first.registry });
    const handle = await engine.client.start(first.definition, {});
    await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
    await worker.stop();
    await engine.worker({ app: 'shop', registry: second.registry });
    expect(await engine.client.signal(handle.id, 'go')).toBe(true);
    return handle;
  }

  async function failure(handle: { result(options: { timeoutMs: number }): Promise<unknown> }): Promise<NonDeterminismError> {
    const error = await handle.result({ timeoutMs: 5_000 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(NonDeterminismError);
    return error as NonDeterminismError;
  }

  it('fails the run when a completed step was renamed, without calling the new step or retrying', async () => {
    const handle = await redeploy(
      deploy(async (step) => {
        await step.run('charge', count('charge'));
        await step.waitForSignal('go', 'go');
        return 'shipped';
      }),
      deploy(async (step) => {
        await step.run('charge-card', count('charge-card'));
        await step.waitForSignal('go', 'go');
        return 'shipped';
      }),
    );
    const error = await failure(handle);
    expect(error).toMatchObject({ runId: handle.id, position: 1, expected: 'charge', found: 'charge-card' });
    expect(error.message).toBe(
      `Run "${handle.id}" is not deterministic: step 1 of its journal is "charge", but the code reached "charge-card" instead. The workflow changed under a run in flight: restore the step, guard the change with step.patched(), or deploy it as a new version (option version).`,
    );
    expect(calls).toEqual({ charge: 1 });
    // Failed at once, on its first attempt, although maxAttempts is 3; the new step left no record.
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', attempt: 1, error: { name: 'NonDeterminismError' } });
    expect((await engine.client.getRunSteps(handle.id)).map((s) => s.name)).toEqual(['charge', 'go']);
  });

  it('fails the run when a new step is inserted before a completed one', async () => {
    const handle = await redeploy(
      deploy(async (step) => {
        await step.run('reserve', count('reserve'));
        await step.waitForSignal('go', 'go');
        await step.run('ship', count('ship'));
      }),
      deploy(async (step) => {
        await step.run('reserve', count('reserve'));
        await step.run('fraud-check', count('fraud-check'));
        await step.waitForSignal('go', 'go');
        await step.run('ship', count('ship'));
      }),
    );
    expect(await failure(handle)).toMatchObject({ position: 2, expected: 'go', found: 'fraud-check' });
    expect(calls).toEqual({ reserve: 1 });
  });

  it('fails the run when the code returns without reaching a completed step', async () => {
    const handle = await redeploy(
      deploy(async (step) => {
        await step.run('reserve', count('reserve'));
        await step.run('notify', count('notify'));
        await step.waitForSignal('go', 'go');
      }),
      deploy(async (step) => {
        await step.run('reserve', count('reserve'));
        await step.waitForSignal('go', 'go');
      }),
    );
    expect(await failure(handle)).toMatchObject({ position: 2, expected: 'notify', found: '(end of the workflow)' });
    expect(calls).toEqual({ reserve: 1, notify: 1 });
  });

  it('lets a step appended after the last recorded one run', async () => {
    const handle = await redeploy(
      deploy(async (step) => {
        await step.run('reserve', count('reserve'));
        await step.waitForSignal('go', 'go');
        return 'v1';
      }),
      deploy(async (step) => {
        await step.run('reserve', count('reserve'));
        await step.waitForSignal('go', 'go');
        await step.run('receipt', count('receipt'));
        return 'appended';
      }),
    );
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('appended');
    expect(calls).toEqual({ reserve: 1, receipt: 1 });
  });

  it('lets a step guarded by step.patched replace a completed one, as documented', async () => {
    const handle = await redeploy(
      deploy(async (step) => {
        await step.run('charge', count('charge'));
        await step.waitForSignal('go', 'go');
        return 'old';
      }),
      deploy(async (step) => {
        if (step.patched('card-charge')) await step.run('charge-card', count('charge-card'));
        else await step.run('charge', count('charge'));
        await step.waitForSignal('go', 'go');
        return 'patched';
      }),
    );
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('patched');
    expect(calls).toEqual({ charge: 1 });
  });

  it('does not fire when a step that failed runs again and the handler takes another way (a try/catch around it)', async () => {
    let attempt = 0;
    const { registry, definition } = deploy(
      async (step) => {
        attempt++;
        let via: string;
        try {
          via = await step.run('primary', () => {
            if (attempt === 1) throw new Error('primary is down');
            return count('primary')();
          });
        } catch {
          via = await step.run('fallback', count('fallback'));
        }
        await step.run('later', () => {
          if (attempt === 1) throw new Error('later fails once');
          return count('later')();
        });
        return via;
      },
      { retries: { maxAttempts: 2, delay: 0 } },
    );
    await engine.worker({ app: 'shop', registry });
    const handle = await engine.client.start(definition, {});
    // The second attempt runs primary again, which works now: fallback, stored after it, is not reached.
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('primary');
    expect(calls).toEqual({ fallback: 1, primary: 1, later: 1 });
  });

  describe('parallel branches', () => {
    /**
     * Two branches: one slow step, and two fast ones in sequence, so the journal stores
     * fast-1, fast-2, slow, while a replay reaches slow first (or second, with `slowFirst` false).
     * `recovery`: the attempt after the branches waits for a signal, or a later step fails once
     * and the run retries; `abortSlow`: fast-2 fails on the first attempt while slow still runs,
     * so slow has no record and is new on the replay while fast-1 is still to be replayed.
     */
    function branches(slowFirst: boolean, recovery: 'signal' | 'retry', abortSlow: boolean) {
      let attempt = 0;
      return deploy(
        async (step) => {
          attempt++;
          const slow = () =>
            step.run('slow', async () => {
              await sleep(60);
              return count('slow')();
            });
          const fast = async () => {
            const a = await step.run('fast-1', async () => {
              await sleep(5);
              return count('fast-1')();
            });
            const b = await step.run('fast-2', async () => {
              await sleep(5);
              if (abortSlow && attempt === 1) throw new Error('fast-2 fails once');
              return count('fast-2')();
            });
            return `${a}+${b}`;
          };
          const [x, y] = slowFirst ? await Promise.all([slow(), fast()]) : (await Promise.all([fast(), slow()])).reverse();
          if (recovery === 'signal') await step.waitForSignal('go', 'go');
          await step.run('after', () => {
            if (recovery === 'retry' && !abortSlow && (calls['after-tries'] = (calls['after-tries'] ?? 0) + 1) === 1) throw new Error('after fails once');
            return count('after')();
          });
          return `${x}|${y}`;
        },
        { retries: { maxAttempts: 3, delay: 0 } },
      );
    }

    it.each([
      [true, 'signal', false],
      [false, 'signal', false],
      [true, 'retry', false],
      [false, 'retry', false],
      [true, 'retry', true],
      [false, 'retry', true],
    ] as const)(
      'replays Promise.all branches in another interleaving without a false alarm (slow first: %s, recovery: %s, slow aborted: %s)',
      async (slowFirst, recovery, abortSlow) => {
        const { registry, definition } = branches(slowFirst, recovery, abortSlow);
        await engine.worker({ app: 'shop', registry });
        const handle = await engine.client.start(definition, {});
        if (recovery === 'signal') {
          await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
          const order = (await engine.client.getRunSteps(handle.id)).map((s) => s.name);
          // The journal's order differs from the order a replay reaches them in.
          expect(order).toEqual(['fast-1', 'fast-2', 'slow', 'go']);
          await engine.client.signal(handle.id, 'go');
        }
        await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('slow|fast-1+fast-2');
        // An aborted step's function is not stopped (it ignores its signal): slow ran in both attempts then.
        expect(calls).toMatchObject({ slow: abortSlow ? 2 : 1, 'fast-1': 1, 'fast-2': 1, after: 1 });
        expect((await engine.client.getRun(handle.id))?.attempt).toBe(recovery === 'retry' ? 2 : 1);
      },
    );

    it('fires when a parallel branch really disagrees with the journal', async () => {
      const parallel = (name: string) =>
        deploy(async (step) => {
          await Promise.all([step.run('slow', async () => (await sleep(30), count('slow')())), step.run(name, count(name))]);
          await step.waitForSignal('go', 'go');
        });
      const handle = await redeploy(parallel('fast'), parallel('faster'));
      expect(await failure(handle)).toMatchObject({ position: 1, expected: 'fast', found: 'faster' });
      expect(calls).toEqual({ slow: 1, fast: 1 });
    });
  });

  describe("onNonDeterminism: 'retry-latest'", () => {
    it('retries the run on the latest registered version, which replays the journal', async () => {
      const v1 = deploy(
        async (step) => {
          await step.run('charge', count('charge'));
          await step.waitForSignal('go', 'go');
          return 'v1';
        },
        { onNonDeterminism: 'retry-latest' },
      );
      const worker = await engine.worker({ app: 'shop', registry: v1.registry });
      const handle = await engine.client.start(v1.definition, {});
      await eventually(async () => (await engine.client.getRun(handle.id))?.status === 'scheduled');
      await worker.stop();
      // A bad deploy at version 1 (a step renamed), and version 2, which keeps the journal's steps.
      const bad = deploy(
        async (step) => {
          await step.run('charge-card', count('charge-card'));
          await step.waitForSignal('go', 'go');
          return 'bad';
        },
        { onNonDeterminism: 'retry-latest' },
      );
      const v2 = deploy(
        async (step) => {
          await step.run('charge', count('charge'));
          await step.waitForSignal('go', 'go');
          return 'v2';
        },
        { version: 2, onNonDeterminism: 'retry-latest' },
      );
      await engine.worker({ app: 'shop', registry: v2.registry });
      await engine.worker({ app: 'shop', registry: bad.registry });
      await engine.client.signal(handle.id, 'go');
      await expect(handle.result({ timeoutMs: 5_000 })).resolves.toBe('v2');
      expect(calls).toEqual({ charge: 1 });
      expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'succeeded', version: 2, queue: 'default', attempt: 2 });
    });

    it('fails the run when it already runs on the latest version', async () => {
      const handle = await redeploy(
        deploy(async (step) => {
          await step.run('charge', count('charge'));
          await step.waitForSignal('go', 'go');
        }),
        deploy(
          async (step) => {
            await step.run('charge-card', count('charge-card'));
            await step.waitForSignal('go', 'go');
          },
          { onNonDeterminism: 'retry-latest' },
        ),
      );
      expect(await failure(handle)).toMatchObject({ position: 1, expected: 'charge', found: 'charge-card' });
      expect(calls).toEqual({ charge: 1 });
      expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'failed', version: 1, attempt: 1 });
    });
  });
});
