import 'reflect-metadata';

import { Injectable } from '@nestjs/common';
import request from 'supertest';

import { aesGcmCodec, RedflowClient, RedflowModule, Workflow, type RunState, type StepState, type WorkflowContext } from '../../lib';
import { createNestApp, nestAppPerTest } from '../support/nest-app';

/**
 * `RedflowModule.forRoot({ codec })`: the app's client and worker seal every payload; the
 * dashboard served by the app decodes with it, and one served by an app without the codec shows
 * the payloads as encrypted, naming the key.
 */
const codec = aesGcmCodec({ keys: { 'key-2026': Buffer.alloc(32, 9) }, current: 'key-2026' });

@Injectable()
class Vault {
  @Workflow({ name: 'vault' })
  async keep({ input, step }: WorkflowContext<{ iban: string }>) {
    const masked = await step.run('mask', () => `${input.iban.slice(0, 4)}…`);
    return { masked, iban: input.iban };
  }
}

/** A payload as the run page has it: its JSON text cut to a preview; parsed back. */
const previewed = (value: unknown): unknown =>
  typeof value === 'object' && value !== null && 'text' in value ? JSON.parse((value as { text: string }).text) : value;

describe('RedflowModule codec option', () => {
  const nest = nestAppPerTest('nest-codec');
  const dashboard = { path: '/ops', authorize: () => true, readOnly: true };

  it('stores the payloads sealed, reads them back in the app, and its dashboard decodes them; a dashboard without the codec says encrypted', async () => {
    const app = await nest.start({
      imports: [RedflowModule.forRoot({ app: 'vault-app', connection: nest.redis, prefix: nest.prefix, codec, dashboard })],
      providers: [Vault],
    });
    const client = app.get(RedflowClient);
    const handle = await client.runByName<{ masked: string; iban: string }>('vault', { iban: 'DE89370400440532013000' });
    await expect(handle.result({ timeout: '10s' })).resolves.toEqual({ masked: 'DE89…', iban: 'DE89370400440532013000' });

    const stored = await nest.redis.hgetall(client.keys.run(handle.id));
    expect(stored.status).toBe('succeeded');
    expect(Object.values(stored).filter((v) => v.includes('370400440532013000') || v.includes('DE89'))).toEqual([]);

    const shown = (await request(app.getHttpServer()).get(`/ops/api/run?id=${handle.id}`).expect(200)).body as { run: RunState; steps: StepState[] };
    expect(previewed(shown.run.input)).toEqual({ iban: 'DE89370400440532013000' });
    expect(previewed(shown.steps[0].output)).toBe('DE89…');

    // A second app on the prefix (producer only) without the codec: its dashboard shows, never garbles.
    const other = await createNestApp({
      imports: [RedflowModule.forRoot({ app: 'ops-app', connection: nest.redis, prefix: nest.prefix, worker: false, dashboard })],
    });
    await other.init();
    try {
      const blind = (await request(other.getHttpServer()).get(`/ops/api/run?id=${handle.id}`).expect(200)).body as { run: RunState; steps: StepState[] };
      expect(previewed(blind.run.input)).toEqual({ encrypted: 'aes-256-gcm, key "key-2026"' });
      expect(previewed(blind.run.output)).toEqual({ encrypted: 'aes-256-gcm, key "key-2026"' });
      expect(previewed(blind.steps[0].output)).toEqual({ encrypted: 'aes-256-gcm, key "key-2026"' });
      expect(blind.run.status).toBe('succeeded');
      // Its client, used by code, refuses with a named error instead.
      await expect(other.get(RedflowClient).getRun(handle.id)).rejects.toThrow('this client has none. Give it the same codec option');
    } finally {
      await other.close();
    }
  });

  it('refuses a codec that is not one at startup, naming the option', async () => {
    await expect(
      nest.start({ imports: [RedflowModule.forRoot({ app: 'bad', connection: nest.redis, prefix: nest.prefix, codec: { encode: 'no' } as never })] }),
    ).rejects.toThrow('createClient option codec must be a payload codec, an object with encode(bytes, context) and decode(bytes, context) functions');
  });
});
