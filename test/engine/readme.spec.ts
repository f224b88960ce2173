import { z } from 'zod';

// The plain TypeScript examples of README.md ("Without Nest", also in docs/guide/getting-started.md) and of
// docs/guide/waits-and-signals.md ("With the core engine"), run as written (only the connection and prefix
// come from the test).
import {
  createAdmin,
  createClient,
  defineWorkflow,
  getDefaultRegistry,
  NonRetriableError,
  setDefaultClient,
  startWorker,
  type Worker,
  type WorkflowContext,
} from '../../lib/core';
import { connect } from '../support/engine';

describe('README example', () => {
  const redis = connect();
  const prefix = `test:readme:${process.pid}`;
  let worker: Worker | undefined;
  afterAll(async () => {
    await worker?.stop();
    const client = createClient({ redis, prefix });
    await createAdmin(client).resetState();
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

  it('runs the waits, child workflows and events example', async () => {
    const charges: string[] = [];
    const charge = async (orderId: string) => (charges.push(orderId), { chargeId: `ch_${orderId}` });
    const client = createClient({ redis, prefix });

    // --- docs/guide/waits-and-signals.md: with the core engine ---
    const sendReceipt = defineWorkflow('send-receipt', { queue: 'email' }, async ({ input }: WorkflowContext<{ orderId: string }>) => ({
      sent: input.orderId,
    }));

    const checkout = defineWorkflow('checkout', { maxConcurrency: 10 }, async ({ input, step }: WorkflowContext<{ orderId: string }>) => {
      await step.run('charge', () => charge(input.orderId));
      await step.sleep('cooldown', '1s'); // the run is `scheduled` meanwhile: no worker slot, no attempt used
      const receipt = await step.runWorkflow({ name: 'receipt', timeoutMs: 60_000 }, sendReceipt, { orderId: input.orderId });
      const childId = await step.emitWorkflow('audit', 'audit-log', { orderId: input.orderId }); // don't wait
      const runIds = await step.emitEvent('announce', 'order.paid', { orderId: input.orderId }); // fan-out
      return { receipt, childId, runIds };
    });

    defineWorkflow('analytics', { event: [{ name: 'order.paid' }], maxConcurrency: Infinity }, async ({ input }) => input);
    // --- end ---
    defineWorkflow('audit-log', {}, async ({ input }) => input);

    const exampleWorker = await startWorker({ app: 'readme-events', client, queues: ['default', 'email'], concurrency: 1 });
    try {
      // --- docs/guide/waits-and-signals.md ---
      const scheduled = await client.emitEvent('order.paid', { orderId: 'ord_1' }, { emitAt: new Date(Date.now() + 60_000) });
      // --- end ---
      expect(scheduled).toEqual([]);
      const handle = await client.start(checkout, { orderId: 'ord_7' });
      const output = (await handle.result({ timeoutMs: 10_000 })) as { receipt: unknown; childId: string; runIds: string[] };
      expect(output.receipt).toEqual({ sent: 'ord_7' });
      expect(output.childId).toBe(`${handle.id}.audit`);
      expect(output.runIds).toEqual([`${handle.id}.announce.analytics`]);
      expect(charges).toEqual(['ord_7']);
      await expect(client.handle(output.runIds[0]).result({ timeoutMs: 5_000 })).resolves.toEqual({ orderId: 'ord_7' });
      await expect(client.handle(output.childId).result({ timeoutMs: 5_000 })).resolves.toEqual({ orderId: 'ord_7' });
    } finally {
      await exampleWorker.stop();
    }
  });
});
