import { TestEngine } from '../support/engine';

/**
 * A step's idempotency key names the step of the run: the same for every try, retry and replay,
 * different for another step, a repeated name's next occurrence, or another run.
 */
describe('a step’s idempotency key', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('is <run id>:<step name>, the same for each try, with the #n suffix of a repeated name', async () => {
    const seen: string[] = [];
    let tries = 0;
    const pay = engine.registry.define('pay', {}, async ({ step }) => {
      await step.run({ name: 'charge', retries: { maxAttempts: 3, delay: 10 } }, ({ idempotencyKey }) => {
        seen.push(idempotencyKey);
        if (++tries < 3) throw new Error('gateway timeout');
      });
      await step.run('mail', ({ idempotencyKey }) => seen.push(idempotencyKey));
      await step.run('mail', ({ idempotencyKey }) => seen.push(idempotencyKey));
    });
    await engine.worker();
    const a = await engine.client.start(pay, {});
    await a.result({ timeoutMs: 5_000 });
    expect(seen).toEqual([`${a.id}:charge`, `${a.id}:charge`, `${a.id}:charge`, `${a.id}:mail`, `${a.id}:mail#2`]);

    seen.length = 0;
    const b = await engine.client.start(pay, {});
    await b.result({ timeoutMs: 5_000 });
    expect(seen[0]).toBe(`${b.id}:charge`);
    expect(b.id).not.toBe(a.id);
  });
});
