import { ConfigurationError, NonRetriableError, type WorkerHooks, type WorkflowContext } from '../../lib';
import { deferred, eventually, TestEngine } from '../support/engine';

/** A logger that keeps its lines, to read what a throwing hook left. */
function captureLogger() {
  const lines: string[] = [];
  const push = (message: string) => void lines.push(message);
  return { lines, log: push, warn: push, error: push };
}

/**
 * Worker hooks: called in process as runs and steps start and end on that worker. Not awaited;
 * a hook that throws or rejects is logged and the run goes on unharmed.
 */
describe('worker hooks', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  /** Hooks that record `<hook> <details>` lines. */
  const recorder = () => {
    const seen: string[] = [];
    const hooks: WorkerHooks = {
      onRunStart: (e) => void seen.push(`run.start ${e.workflow} attempt=${e.attempt}/${e.maxAttempts} input=${JSON.stringify(e.input)}`),
      onRunComplete: (e) => void seen.push(`run.complete ${e.workflow} output=${JSON.stringify(e.output)}`),
      onRunFailed: (e) => void seen.push(`run.failed ${e.workflow} attempt=${e.attempt} retry=${e.willRetry} ${(e.error as Error).message}`),
      onRunCanceled: (e) => void seen.push(`run.canceled ${e.workflow}`),
      onStepStart: (e) => void seen.push(`step.start ${e.step}`),
      onStepComplete: (e) => void seen.push(`step.complete ${e.step} output=${JSON.stringify(e.output)}`),
      onStepFailed: (e) => void seen.push(`step.failed ${e.step} retry=${e.willRetry} ${(e.error as Error).message}`),
    };
    return { seen, hooks };
  };

  it('reports runs and steps in order, steps only when their function runs (not on replay)', async () => {
    const { seen, hooks } = recorder();
    let flaky = 0;
    const wf = engine.define('order', { retries: { maxAttempts: 2, delay: 10 } }, async ({ input, step }: WorkflowContext<{ id: string }>) => {
      const charged = await step.run('charge', () => `charged ${input.id}`);
      await step.run({ name: 'reserve', retries: { maxAttempts: 2, delay: 1 } }, () => {
        if (++flaky === 1) throw new Error('stock service busy');
        return 'reserved';
      });
      if (flaky === 2) {
        flaky++;
        throw new Error('ship failed once');
      }
      return charged;
    });
    await engine.worker({ hooks });
    const handle = await engine.client.start(wf, { id: 'o-1' });
    expect(await handle.result({ timeoutMs: 5_000 })).toBe('charged o-1');
    await eventually(() => seen.includes('run.complete order output="charged o-1"'));
    expect(seen).toEqual([
      'run.start order attempt=1/2 input={"id":"o-1"}',
      'step.start charge',
      'step.complete charge output="charged o-1"',
      'step.start reserve',
      'step.failed reserve retry=true stock service busy',
      'step.start reserve',
      'step.complete reserve output="reserved"',
      'run.failed order attempt=1 retry=true ship failed once',
      // The second attempt replays both stored steps: no step hooks.
      'run.start order attempt=2/2 input={"id":"o-1"}',
      'run.complete order output="charged o-1"',
    ]);
  });

  it('reports a run that fails for good, and a run canceled while it runs here', async () => {
    const { seen, hooks } = recorder();
    const gate = deferred();
    const failing = engine.define('failing', {}, async ({ step }) => {
      await step.run('boom', () => {
        throw new NonRetriableError('card declined');
      });
    });
    const blocked = engine.define('blocked', {}, async ({ step }) => step.run('wait', () => gate.promise));
    await engine.worker({ hooks });
    await expect((await engine.client.start(failing, {})).result({ timeoutMs: 5_000 })).rejects.toThrow('card declined');
    const handle = await engine.client.start(blocked, {});
    await eventually(() => seen.includes('step.start wait'));
    await engine.client.cancelRun(handle.id);
    await eventually(() => seen.includes('run.canceled blocked'));
    gate.resolve();
    expect(seen.filter((l) => l.includes('failing'))).toEqual([
      'run.start failing attempt=1/1 input={}',
      'run.failed failing attempt=1 retry=false card declined',
    ]);
    expect(seen).toContain('step.failed boom retry=false card declined');
  });

  it('a hook that throws or rejects is logged, and the run is not harmed', async () => {
    const logger = captureLogger();
    let steps = 0;
    const wf = engine.define('sturdy', {}, async ({ step }) => {
      await step.run('one', () => ++steps);
      await step.run('two', () => ++steps);
      return 'fine';
    });
    await engine.worker({
      logger,
      hooks: {
        onRunStart: () => {
          throw new Error('hook exploded');
        },
        onStepComplete: async () => {
          throw new Error('async hook exploded');
        },
        onRunComplete: () => {
          throw 'not even an Error';
        },
      },
    });
    const handle = await engine.client.start(wf, {});
    expect(await handle.result({ timeoutMs: 5_000 })).toBe('fine');
    expect(steps).toBe(2);
    expect(await engine.client.getRun(handle.id)).toMatchObject({ status: 'succeeded', attempt: 1 });
    await eventually(() => logger.lines.filter((l) => l.startsWith('Hook ')).length === 4);
    expect(logger.lines.filter((l) => l.startsWith('Hook ')).sort()).toEqual([
      `Hook onRunComplete (run "${handle.id}") threw: not even an Error. The run is not affected.`,
      `Hook onRunStart (run "${handle.id}") threw: hook exploded. The run is not affected.`,
      `Hook onStepComplete (run "${handle.id}") threw: async hook exploded. The run is not affected.`,
      `Hook onStepComplete (run "${handle.id}") threw: async hook exploded. The run is not affected.`,
    ]);
  });

  it('onError hears the worker errors it logs; bad hooks are refused at start', async () => {
    const errors: string[] = [];
    const logger = captureLogger();
    engine.define('plain', {}, () => 1);
    const worker = await engine.worker({ logger, hooks: { onError: (error, context) => void errors.push(`${context.task}: ${(error as Error).message}`) } });
    // A cron whose stored definition is corrupt cannot fire: the worker logs it, and onError hears it.
    await engine.redis.hset(engine.client.keys.cronDefs(), 'broken', '{not json');
    await engine.redis.zadd(engine.client.keys.cronNext(), Date.now() - 1, 'broken');
    await eventually(() => errors.length > 0);
    expect(errors[0]).toMatch(/^cron: /);
    expect(logger.lines.some((l) => l.startsWith('Cron "broken" could not fire'))).toBe(true);
    await engine.redis.zrem(engine.client.keys.cronNext(), 'broken');
    expect(worker.hooks.has('onError')).toBe(true);

    await expect(engine.worker({ hooks: { onRunDone: () => 1 } as never })).rejects.toThrow(ConfigurationError);
    await expect(engine.worker({ hooks: { onRunStart: 'log' } as never })).rejects.toThrow('Worker hook "onRunStart" must be a function, got string.');
  });
});
