// The README's quick example, run as written (only the connection and prefix come from the test).
import { createClient, defineWorkflow, getDefaultRegistry, NonRetriableError, setDefaultClient, startWorker, type Worker } from '../../lib';
import { connect } from '../support/engine';
import { z } from 'zod';

describe('README example', () => {
  const redis = connect();
  const prefix = `test:readme:${process.pid}`;
  let worker: Worker | undefined;
  afterAll(async () => {
    await worker?.stop();
    const client = createClient({ redis, prefix });
    await client.resetState();
    setDefaultClient(undefined);
    await redis.quit();
  });

  it('defines, runs and inspects a workflow with the default registry and client', async () => {
    const emailsSent: string[] = [];
    const sendEmail = async (to: string) => (emailsSent.push(to), { id: `msg_${emailsSent.length}` });

    // --- README: define ---
    const sendWelcomeEmail = defineWorkflow(
      'send-welcome-email',
      {
        schema: z.object({ userId: z.string().min(1) }),
        retries: { maxAttempts: 3, delay: '1s' },
      },
      async ({ input, step }) => {
        const user = await step.run({ name: 'fetch-user' }, async () => {
          return { id: input.userId, email: `${input.userId}@example.com` };
        });
        const message = await step.run({ name: 'send-email', timeoutMs: 5_000 }, async ({ signal }) => {
          if (signal.aborted) throw new NonRetriableError('aborted');
          return sendEmail(user.email);
        });
        return { sent: true, messageId: message.id };
      },
    );

    // --- README: run ---
    const client = createClient({ redis, prefix }); // or { url: process.env.REDIS_URL }
    setDefaultClient(client);
    worker = await startWorker({ app: 'billing-service', client, concurrency: 10 });

    const handle = await sendWelcomeEmail.run({ userId: 'user_123' }, { idempotencyKey: 'welcome:user_123' });
    const output = await handle.result({ timeoutMs: 15_000 });
    // --- end ---

    expect(output).toEqual({ sent: true, messageId: 'msg_1' });
    expect(emailsSent).toEqual(['user_123@example.com']);
    expect(getDefaultRegistry().get('send-welcome-email')).toBe(sendWelcomeEmail);
    expect((await client.getRunSteps(handle.id)).map((s) => s.name)).toEqual(['fetch-user', 'send-email']);
    expect((await client.listRuns({ workflow: 'send-welcome-email', status: 'succeeded' })).map((r) => r.id)).toEqual([handle.id]);
    const again = await sendWelcomeEmail.run({ userId: 'user_123' }, { idempotencyKey: 'welcome:user_123' });
    expect(again.id).toBe(handle.id);
  });
});
