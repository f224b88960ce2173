import { createAdmin } from '../../lib';

import 'reflect-metadata';

import { randomBytes } from 'node:crypto';
import type { INestApplication } from '@nestjs/common';
import { ValidationPipe } from '@nestjs/common';
import request from 'supertest';
import type { App } from 'supertest/types';

import { RedflowClient, type RunState, type StepState } from '../../lib';
import { RedflowOrchestrator } from '../../lib/nest/redflow.orchestrator';
import { AnalyticsWorkflows } from '../../sample/src/analytics/analytics.workflows';
import { AppModule } from '../../sample/src/app.module';
import { PaymentService } from '../../sample/src/orders/payment.service';
import { createNestApp } from '../support/nest-app';

/** What GET /runs/:id answers: the run plus its steps. */
type RunView = RunState & { steps: StepState[] };

const suffix = randomBytes(4).toString('hex');
const order = { orderId: `ord_${suffix}`, email: 'ada@example.com', totalCents: 1999 };
const failingOrder = { orderId: `fail-${suffix}`, email: 'bob@example.com', totalCents: 500 };

/** Polls `check` every 20 ms until it returns a truthy value, or throws after `timeoutMs`. */
async function eventually<T>(check: () => Promise<T> | T, what: string, timeoutMs = 5_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`Not met within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('sample shop over HTTP (AppModule with its worker, real Redis)', () => {
  const saved = { REDIS_URL: process.env.REDIS_URL, REDFLOW_PREFIX: process.env.REDFLOW_PREFIX };
  let app: INestApplication<App>;
  let client: RedflowClient;
  let payments: PaymentService;
  let analytics: AnalyticsWorkflows;
  let runId: string;

  const http = () => request(app.getHttpServer());

  /** GET /runs/:id until the run has ended (succeeded, failed or canceled). */
  async function waitForEnd(id: string): Promise<RunView> {
    return eventually(async () => {
      const res = await http().get(`/runs/${id}`).expect(200);
      const run = res.body as RunView;
      return RedflowClient.isTerminal(run.status) ? run : undefined;
    }, `run ${id} ends`);
  }

  beforeAll(async () => {
    const url = process.env.REDFLOW_TEST_REDIS_URL;
    if (!url) throw new Error('The jest global setup did not start Redis: run the tests with jest.');
    // AppModule reads both in its forRootAsync factory, so they must be set before compile().
    process.env.REDIS_URL = url;
    process.env.REDFLOW_PREFIX = `test:sample:${randomBytes(5).toString('hex')}`;
    app = await createNestApp({ imports: [AppModule.register({ worker: true })] }, { logger: ['error', 'warn'] });
    app.useGlobalPipes(new ValidationPipe({ whitelist: true, forbidNonWhitelisted: true }));
    await app.init();
    client = app.get(RedflowClient);
    payments = app.get(PaymentService);
    analytics = app.get(AnalyticsWorkflows);
  });

  afterAll(async () => {
    try {
      if (app) {
        // Stop the worker first (app.close() stops it again, a no-op): a run or cron tick still in
        // flight could otherwise recreate keys between resetState's SCAN and UNLINK.
        await app.get(RedflowOrchestrator).stopWorker();
        await createAdmin(client).resetState();
        await app.close();
      }
    } finally {
      for (const [name, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[name];
        else process.env[name] = value;
      }
    }
  });

  it('rejects an invalid order with 400 and the validation messages, and starts no run', async () => {
    // First test of the file, on a fresh prefix: no checkout run exists yet. (Runs of other
    // workflows may: the sales-digest cron fires at every minute boundary.)
    expect(await client.listRuns({ workflow: 'checkout' })).toEqual([]);
    const res = await http().post('/orders').send({ orderId: '', email: 'not-an-email', totalCents: 0, coupon: 'FREE' }).expect(400);
    expect(res.body.statusCode).toBe(400);
    expect(res.body.error).toBe('Bad Request');
    expect([...(res.body.message as string[])].sort()).toEqual(
      [
        'orderId must be longer than or equal to 1 characters',
        'email must be an email',
        'totalCents must not be less than 1',
        'property coupon should not exist',
      ].sort(),
    );
    expect(await client.listRuns({ workflow: 'checkout' })).toEqual([]);
    expect(payments.charges).toEqual([]);
  });

  it('runs checkout to the end: charge once, cooldown, receipt child, order.completed event', async () => {
    const res = await http().post('/orders').send(order).expect(201);
    expect(res.body).toEqual({ runId: expect.any(String) });
    runId = res.body.runId;

    const run = await waitForEnd(runId);
    expect(run.status).toBe('succeeded');
    expect(run.workflow).toBe('checkout');
    expect(run.idempotencyKey).toBe(order.orderId);
    const receipt = { to: order.email, subject: `Your order ${order.orderId}` };
    expect(run.output).toEqual({ orderId: order.orderId, chargeId: `ch_${order.orderId}`, receipt });
    expect(run.steps.map((s) => s.name)).toEqual(['charge-card', 'cooldown', 'receipt', 'announce']);
    const [charge, cooldown, receiptStep, announce] = run.steps;
    expect(charge).toMatchObject({ status: 'succeeded', output: { chargeId: `ch_${order.orderId}`, cents: order.totalCents } });
    expect(cooldown).toMatchObject({ status: 'succeeded', wakeAt: expect.any(Number) });
    expect(cooldown.wakeAt!).toBeLessThanOrEqual(run.finishedAt!);
    expect(receiptStep).toMatchObject({ status: 'succeeded', output: receipt });
    const saleRunId = `${runId}.announce.record-sale`;
    expect(announce).toMatchObject({ status: 'succeeded', output: [saleRunId] });
    expect(payments.charges).toEqual([order.orderId]);

    // The receipt is a child run of its own workflow, on the email queue.
    const child = await client.getRun(`${runId}.receipt`);
    expect(child).toMatchObject({ workflow: 'send-receipt', queue: 'email', status: 'succeeded', output: receipt });

    // The event started one analytics run, which records the sale.
    await eventually(() => analytics.completedOrders.includes(order.orderId), 'the sale is recorded');
    const sale = await eventually(async () => {
      const state = await client.getRun(saleRunId);
      return state?.status === 'succeeded' ? state : undefined;
    }, 'the record-sale run succeeds');
    expect(sale).toMatchObject({
      workflow: 'record-sale',
      input: { orderId: order.orderId, totalCents: order.totalCents },
      output: { recorded: order.orderId },
    });
    expect(analytics.completedOrders.filter((id) => id === order.orderId)).toHaveLength(1);
  });

  it('answers a repeated POST with the same run (the order id is the idempotency key) and charges once', async () => {
    const res = await http().post('/orders').send(order).expect(201);
    expect(res.body).toEqual({ runId });
    const runs = await client.listRuns({ workflow: 'checkout' });
    expect(runs.map((r) => r.id)).toEqual([runId]);
    expect((await http().get(`/runs/${runId}`).expect(200)).body.status).toBe('succeeded');
    expect(payments.charges).toEqual([order.orderId]);
  });

  it('answers 409 when an order id is reused with other details, starting nothing', async () => {
    const res = await http()
      .post('/orders')
      .send({ ...order, totalCents: order.totalCents + 1 })
      .expect(409);
    expect(res.body).toEqual({ statusCode: 409, error: 'Conflict', message: `Order "${order.orderId}" was already placed with other details.` });
    expect((await client.listRuns({ workflow: 'checkout' })).map((r) => r.id)).toEqual([runId]);
  });

  it('fails an unshippable order without retrying and refunds its charge in onFailure', async () => {
    const res = await http().post('/orders').send(failingOrder).expect(201);
    const failedId = res.body.runId as string;
    expect(failedId).not.toBe(runId);

    const run = await waitForEnd(failedId);
    expect(run.status).toBe('failed');
    expect(run.attempt).toBe(1);
    expect(run.error).toMatchObject({ name: 'NonRetriableError', message: `Order ${failingOrder.orderId} cannot be shipped.` });
    expect(run.output).toBeUndefined();
    // It fails before the `announce` step: no sale is recorded for it.
    expect(run.steps.map((s) => s.name)).toEqual(['charge-card', 'cooldown', 'receipt']);
    expect(analytics.completedOrders).not.toContain(failingOrder.orderId);
    expect(payments.charges).toEqual([order.orderId, failingOrder.orderId]);
    await eventually(() => payments.refunds.length > 0, 'the charge is refunded');
    expect(payments.refunds).toEqual([`ch_${failingOrder.orderId}`]);
  });

  it('answers 404 for an unknown run and { canceled: false } for canceling an ended run', async () => {
    const res = await http().get('/runs/unknown').expect(404);
    expect(res.body).toEqual({ statusCode: 404, error: 'Not Found', message: 'Run "unknown" does not exist.' });

    const cancel = await http().post(`/runs/${runId}/cancel`).expect(200);
    expect(cancel.body).toEqual({ canceled: false });
    const after = (await http().get(`/runs/${runId}`).expect(200)).body as RunView;
    expect(after.status).toBe('succeeded');
    expect(after.cancelReason).toBeUndefined();
  });
});
