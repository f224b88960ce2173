import { TestEngine } from '../support/engine';

describe('a first run', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('runs a workflow with two steps and stores their outputs', async () => {
    const wf = engine.registry.define('greet', {}, async ({ input, step }) => {
      const a = await step.run({ name: 'a' }, () => `hello ${(input as { who: string }).who}`);
      const b = await step.run({ name: 'b' }, () => a.length);
      return { a, b };
    });
    await engine.worker();
    const handle = await engine.client.start(wf, { who: 'ada' });
    await expect(handle.result({ timeoutMs: 5000 })).resolves.toEqual({ a: 'hello ada', b: 9 });
    const steps = await engine.client.getRunSteps(handle.id);
    expect(steps.map((s) => [s.name, s.status, s.output])).toEqual([
      ['a', 'succeeded', 'hello ada'],
      ['b', 'succeeded', 9],
    ]);
    const run = await handle.getState();
    expect(run).toMatchObject({ status: 'succeeded', attempt: 1, workflow: 'greet', queue: 'default' });
  });
});
