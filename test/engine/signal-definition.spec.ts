import { ConfigurationError, defineSignal, InputValidationError, type StandardSchemaV1 } from '../../lib/core';
import { eventually, TestEngine } from '../support/engine';

/** A Standard Schema of `{ level: number >= 1 }`, written by hand (no validation library needed). */
const levelSchema: StandardSchemaV1<unknown, { level: number }> = {
  '~standard': {
    version: 1,
    vendor: 'test',
    validate: (value) => {
      const level = (value as { level?: unknown } | null)?.level;
      return typeof level === 'number' && level >= 1 ? { value: { level } } : { issues: [{ message: 'level must be a number >= 1', path: ['level'] }] };
    },
  },
};

/** A signal defined once: the waiting step and the sender share its name, its payload type and its schema. */
describe('defineSignal', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  it('types the wait and the send from one definition, and validates the payload before sending it', async () => {
    const approve = defineSignal('approve', levelSchema);
    const approval = engine.registry.define('approval-defined', {}, async ({ step }) => {
      const decision = await step.waitForSignal('await-approval', approve, { timeout: '1m' });
      return decision?.level ?? 0; // typed: { level: number } | null
    });
    await engine.worker();
    const run = await engine.client.start(approval, {});
    await eventually(async () => (await engine.client.getRun(run.id))?.waitingFor?.name === 'approve');

    // A bad payload is refused, naming the signal, and nothing is sent: the run still waits.
    const refused = engine.client.signal(run.id, approve, { level: 0 });
    await expect(refused).rejects.toThrow(InputValidationError);
    await expect(engine.client.signal(run.id, approve, { level: 0 })).rejects.toThrow('The payload of signal "approve"');
    expect((await engine.client.getRun(run.id))?.waitingFor?.name).toBe('approve');

    await expect(engine.client.signal(run.id, approve, { level: 2 })).resolves.toBe(true);
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe(2);
  });

  it('without a schema, only types the payload; a definition and its name reach the same wait', async () => {
    const ping = defineSignal<{ n: number }>('ping');
    const wf = engine.registry.define('ping-defined', {}, async ({ step }) => {
      const a = await step.waitForSignal('first', ping);
      const b = await step.waitForSignal<{ n: number }>('second', 'ping');
      return (a?.n ?? 0) + (b?.n ?? 0);
    });
    await engine.worker();
    const run = await engine.client.start(wf, {});
    await engine.client.signal(run.id, ping, { n: 1 });
    await engine.client.signal(run.id, 'ping', { n: 2 });
    await expect(run.result({ timeoutMs: 5_000 })).resolves.toBe(3);
  });

  it('refuses a bad name or schema with ConfigurationError', () => {
    expect(() => defineSignal('')).toThrow(ConfigurationError);
    expect(() => defineSignal('ok', 42 as never)).toThrow('defineSignal("ok") takes a Standard Schema');
  });
});
