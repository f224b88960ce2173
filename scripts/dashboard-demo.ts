// A dashboard with runs worth looking at, on a throwaway redis-server: what `npm run screenshots`
// photographs, and what you can open yourself with `node -r @swc-node/register scripts/dashboard-demo.ts`.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

import { createDashboardHandler, NonRetriableError, WorkflowRegistry } from '../lib';
import { createTestEngine, type RedflowTestEngine } from '../lib/testing/core';

export interface Demo {
  engine: RedflowTestEngine;
  /** The dashboard's address, ending in `/redflow/`. */
  url: string;
  ids: { shipped: string; awaiting: string[]; compensated: string; failed: string };
  close(): Promise<void>;
}

const until = async (check: () => Promise<boolean>, ms = 15_000) => {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('The demo runs did not reach their states within 15 s.');
    await new Promise((r) => setTimeout(r, 20));
  }
};

export async function startDemo(): Promise<Demo> {
  const engine = createTestEngine();
  const { registry, client } = engine;
  let declines = 0;
  const notify = registry.define('notify', { queue: 'mail' }, async ({ input, step }) => {
    await step.run('render', () => `Your order ${(input as { order: string }).order} is on its way`);
    await step.sleep('throttle', '150ms');
    return step.run('send', () => ({ sent: true }));
  });
  const checkout = registry.define('checkout', { maxConcurrency: Infinity }, async ({ input, step, setEvent }) => {
    const { order, amount } = input as { order: string; amount: number };
    const reservation = await step.run({ name: 'reserve-stock', compensate: () => 'released' }, () => ({ order, reserved: 3 }));
    await setEvent('reservation', reservation);
    await step.run({ name: 'charge-card', retries: { maxAttempts: 3, delay: '100ms', backoff: 'fixed' } }, () => {
      if (order.endsWith('-flaky') && declines++ % 3 < 2) throw new Error('card network timeout');
      if (amount > 1000) throw new NonRetriableError(`amount ${amount} is over the limit`);
      return { charged: amount };
    });
    await step.sleep('cool-off', '200ms');
    const approval = await step.waitForSignal('approval', 'approve', { timeout: '1h' });
    await step.runWorkflow('notify-customer', notify, { order });
    return { order, approvedBy: approval };
  });
  await engine.worker({ concurrency: 20 });
  await client.schedule('nightly-report', { workflow: 'notify', cron: '0 3 * * *', input: { order: 'report' } });

  const shipped = (await client.start(checkout, { order: 'A-1001-flaky', amount: 42 })).id;
  const awaiting: string[] = [];
  for (let i = 0; i < 3; i++) awaiting.push((await client.start(checkout, { order: `A-20${i}`, amount: 10 + i })).id);
  const failed = (await client.start(checkout, { order: 'A-3000', amount: 5000 })).id;
  const compensated = failed;
  const waitingOnSignal = async (id: string) => (await client.getRunSteps(id)).some((s) => s.status === 'waiting' && s.signal === 'approve');
  await until(async () => {
    const states = await Promise.all(
      [shipped, ...awaiting].map(async (id) => [(await client.getRun(id))?.status, JSON.stringify(await client.getRunSteps(id))]),
    );
    if (process.env.DEMO_DEBUG) console.log(states);
    return (await Promise.all([shipped, ...awaiting].map(waitingOnSignal))).every(Boolean);
  });
  await client.signal(shipped, 'approve', { by: 'ops@example.com' });
  await until(async () => (await client.getRun(shipped))?.status === 'succeeded' && (await client.getRun(failed))?.status !== 'running');

  // Runs of billing v1 wait while only a v2 worker is left: the Versions page's banner.
  const billing = (version: number) => {
    const r = new WorkflowRegistry();
    r.define('billing', { version, queue: 'billing' }, async ({ step }) => step.waitForSignal('go', 'go'));
    return r;
  };
  const v1 = await engine.worker({ app: 'billing-service', registry: billing(1) });
  const bill = await client.runByName('billing', {});
  await until(async () => (await client.getRun(bill.id))?.status === 'scheduled');
  await engine.worker({ app: 'billing-service', registry: billing(2) });
  await v1.stop();

  const handler = createDashboardHandler(client, { path: '/redflow', authorize: () => true, readOnly: false });
  const server: Server = createServer((req, res) => {
    handler(req, res).then(
      (handled) => handled || res.writeHead(404).end(),
      (error: unknown) => res.writeHead(500).end(String(error)),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/redflow/`;
  return {
    engine,
    url,
    ids: { shipped, awaiting, compensated, failed },
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await engine.close();
    },
  };
}

if (require.main === module) {
  startDemo().then(
    (demo) => {
      console.log(`The dashboard: ${demo.url} (Ctrl-C to stop)`);
      process.once('SIGINT', () => void demo.close().then(() => process.exit(0)));
    },
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
