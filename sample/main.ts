/**
 * The sample: a checkout workflow with durable steps, a retry that does not repeat the charge,
 * and a cancellation. Run it with `npm run sample`; without REDIS_URL it starts its own redis-server.
 */
import { Redis } from 'ioredis';
import { createClient, NonRetriableError, startWorker, WorkflowRegistry, type WorkflowContext } from '../lib';

const { startStandalone, stopServers, hasRedisServer, NO_REDIS } = require('../scripts/redis-servers');

const registry = new WorkflowRegistry();
let charges = 0;

const checkout = registry.define(
  'checkout',
  { retries: { maxAttempts: 3, delay: '200ms' } },
  async ({ input, step, run }: WorkflowContext<{ orderId: string; cents: number }>) => {
    const charge = await step.run({ name: 'charge-card' }, () => {
      charges++;
      return { chargeId: `ch_${input.orderId}`, cents: input.cents };
    });
    await step.run({ name: 'reserve-stock' }, () => {
      if (run.attempt === 1) throw new Error('warehouse API timed out');
      return { reserved: true };
    });
    const email = await step.run({ name: 'send-receipt' }, () => ({ to: 'buyer@example.com' }));
    return { orderId: input.orderId, chargeId: charge.chargeId, receiptTo: email.to };
  },
);

const slowReport = registry.define('slow-report', {}, async ({ step }) => {
  await step.run({ name: 'crunch' }, ({ signal }) => new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, 60_000);
    signal.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)));
  }));
  throw new NonRetriableError('unreachable in this sample');
});

async function main(): Promise<void> {
  let server: { url: string } | undefined;
  let url = process.env.REDIS_URL;
  if (!url) {
    if (!hasRedisServer()) {
      console.error(NO_REDIS);
      process.exit(1);
    }
    server = await startStandalone();
    url = server!.url;
    console.log(`Started a local redis-server at ${url} (set REDIS_URL to use your own).`);
  }
  const redis = new Redis(url!, { maxRetriesPerRequest: null });
  const client = createClient({ redis, prefix: `sample:${process.pid}`, registry });
  const worker = await startWorker({ app: 'sample', client, concurrency: 4 });
  try {
    const order = await client.start(checkout, { orderId: 'ord_42', cents: 1999 });
    console.log(`Started run ${order.id} of "checkout".`);
    console.log('Output:', await order.result({ timeoutMs: 10_000 }));
    const state = await order.getState();
    console.log(`Status ${state?.status} after ${state?.attempt} attempts; the card was charged ${charges} time(s).`);
    for (const s of await client.getRunSteps(order.id)) console.log(`  step ${s.name}: ${s.status} (attempt ${s.attempt})`);

    const report = await client.start(slowReport, {});
    await new Promise((r) => setTimeout(r, 100));
    await client.cancelRun(report.id, { reason: 'no longer needed' });
    await report.result().catch((error: Error) => console.log(`slow-report: ${error.name}: ${error.message}`));
  } finally {
    await worker.stop();
    await client.resetState();
    await client.close();
    await redis.quit();
    if (server) await stopServers(server);
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
