import { CorruptRunDataError } from '../../lib/core/errors';
import { PLAIN_PAYLOADS } from '../../lib/core/store/payloads';
import { StepRuntime, type AttemptContext } from '../../lib/core/worker/step-runtime';

/**
 * Replay reads stored step records through the codec (store/step-record.ts): a damaged record is
 * reported as corrupt run data naming the run and the step, never replayed as whatever its
 * positions happen to hold. No Redis needed: replay fails before any call.
 */

/** An attempt context for replay only: nothing in it may be called; stored values are read as plain JSON. */
const replayOnly = (runId: string) =>
  new Proxy({ runId, attempt: 1, payloads: PLAIN_PAYLOADS } as unknown as AttemptContext, {
    get: (target, key) => {
      if (key in target || key === 'then') return (target as unknown as Record<string | symbol, unknown>)[key];
      throw new Error(`replay touched ctx.${String(key)}`);
    },
  });

describe('step replay', () => {
  it.each([
    ['step.run', (rt: StepRuntime, fn: () => unknown) => rt.api.run('pay', fn)],
    ['step.waitFor', (rt: StepRuntime) => rt.api.waitFor('pay', 1_000)],
    ['step.waitForSignal', (rt: StepRuntime) => rt.api.waitForSignal('pay', 'approve')],
    ['step.waitForEvent', (rt: StepRuntime) => rt.api.waitForEvent('pay', 'paid')],
    ['step.runWorkflow', (rt: StepRuntime) => rt.api.runWorkflow('pay', 'child', {})],
    ['step.emitEvent', (rt: StepRuntime) => rt.api.emitEvent('pay', 'paid', {})],
  ])('%s on a damaged record rejects with CorruptRunDataError naming the run and the step', async (_, call) => {
    const fn = jest.fn();
    for (const damaged of ['[1,1,1]', '[7,1,1,0,0]', '{"ok":1}', '[1,1,', '[5,1,1,"paid",0,"x"]']) {
      const runtime = new StepRuntime(replayOnly('run-7'), new Map([['s:pay', damaged]]));
      const replay = Promise.resolve().then(() => call(runtime, fn));
      await expect(replay).rejects.toThrow(CorruptRunDataError);
      await expect(replay).rejects.toThrow(/^Run "run-7" has corrupt data in Redis \(field "s:pay" \(step "pay"\) is not (a step record|valid JSON)\)/);
    }
    expect(fn).not.toHaveBeenCalled();
  });

  it('replays a stored output without calling the step function', async () => {
    const fn = jest.fn();
    const runtime = new StepRuntime(replayOnly('run-7'), new Map([['s:pay', '[1,1,1,100,4,{"id":"ch_1"}]']]));
    await expect(runtime.api.run('pay', fn)).resolves.toEqual({ id: 'ch_1' });
    expect(fn).not.toHaveBeenCalled();
  });
});
