import 'reflect-metadata';

import type { TestingModule } from '@nestjs/testing';
import { Test } from '@nestjs/testing';

import { RedflowTesting, RedflowTestingModule } from '../../lib/testing';
import type { CheckoutWorkflows as CheckoutClass } from '../../sample/src/orders/checkout.workflows';
import type { PaymentService as PaymentClass } from '../../sample/src/orders/payment.service';

/**
 * The sample's checkout under RedflowTestingModule: a real cooldown of an hour, passed by moving
 * the virtual clock, with the card charge mocked.
 */
describe('checkout with RedflowTestingModule', () => {
  let moduleRef: TestingModule;
  let testing: RedflowTesting;
  let payments: PaymentClass;
  let CheckoutWorkflows: typeof CheckoutClass;

  beforeAll(async () => {
    // Read when the workflows module loads: a production-like cooldown.
    process.env.CHECKOUT_COOLDOWN = '1h';
    ({ CheckoutWorkflows } = await import('../../sample/src/orders/checkout.workflows'));
    const { PaymentService } = await import('../../sample/src/orders/payment.service');
    moduleRef = await Test.createTestingModule({
      imports: [RedflowTestingModule.forRoot({ connection: process.env.REDFLOW_TEST_REDIS_URL })],
      providers: [PaymentService, CheckoutWorkflows],
    }).compile();
    await moduleRef.init();
    testing = moduleRef.get(RedflowTesting);
    payments = moduleRef.get(PaymentService);
  });
  afterAll(async () => {
    await moduleRef.close();
    delete process.env.CHECKOUT_COOLDOWN;
  });

  it('charges, waits out the 1h cooldown and sends the receipt, in well under a second', async () => {
    const order = { orderId: 'ord_1', email: 'ada@example.com', totalCents: 1999 };
    const started = performance.now();
    const waiting = await testing.run(CheckoutWorkflows, 'checkout', order, {
      steps: { chargeCard: { output: { chargeId: 'ch_mocked', cents: 1999 } } },
    });
    expect(waiting.status).toBe('waiting');
    expect(waiting.waits).toEqual([expect.objectContaining({ name: 'cooldown', wakeAt: expect.any(Number) })]);
    expect(waiting.waits[0].wakeAt! - testing.clock.now()).toBeGreaterThan(59 * 60_000);

    await testing.clock.advance('1h');
    const done = await testing.runUntilWaiting(waiting.runId);
    const elapsedMs = performance.now() - started;

    expect(done).toMatchObject({
      status: 'succeeded',
      output: { orderId: 'ord_1', chargeId: 'ch_mocked', receipt: { to: 'ada@example.com', subject: 'Your order ord_1' } },
    });
    expect(done.steps.map((s) => `${s.name}:${s.status}`)).toEqual(['charge-card:succeeded', 'cooldown:succeeded', 'receipt:succeeded', 'announce:succeeded']);
    expect(payments.charges).toEqual([]); // the mocked step did not call the payment service
    expect(elapsedMs).toBeLessThan(1_000);
  });

  it('a mocked step error goes through the run retries to failure', async () => {
    const failed = await testing.run(
      CheckoutWorkflows,
      'checkout',
      { orderId: 'ord_2', email: 'bob@example.com', totalCents: 500 },
      {
        steps: { 'charge-card': { error: 'Card declined.' } },
      },
    );
    // Each of the 3 run attempts tries the step 3 times (the default step retries: 1 s, then 2 s
    // apart), then the run retries after 200 ms: the clock is moved past each wait in turn.
    let ended = failed;
    const waits: string[] = [];
    while (ended.status === 'waiting' && waits.length < 20) {
      waits.push(ended.status);
      await testing.clock.advance('2s');
      ended = await testing.runUntilWaiting(failed.runId);
    }
    expect(ended).toMatchObject({ status: 'failed', error: { message: 'Card declined.' } });
    expect(ended.state.attempt).toBe(3);
    // 2 step retries in each of 3 attempts, and 2 run retries between them.
    expect(waits).toHaveLength(8);
    expect(ended.steps.find((s) => s.name === 'charge-card')).toMatchObject({ status: 'failed', attempts: 9 });
  });

  it('types step mocks keyed by @Step method name', () => {
    const wrongType = () =>
      testing.run(
        CheckoutWorkflows,
        'checkout',
        { orderId: 'x', email: 'x@example.com', totalCents: 1 },
        {
          // @ts-expect-error chargeId is a string in PaymentService.charge's result
          steps: { chargeCard: { output: { chargeId: 42, cents: 1 } } },
        },
      );
    expect(typeof wrongType).toBe('function');
  });
});
