import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { ConfigurationError, NonRetriableError, RedflowClient, RedflowModule, Step, Workflow, type CompensationContext, type WorkflowContext } from '../../lib';
import { eventually } from '../support/engine';
import { nestAppPerTest } from '../support/nest-app';

/** A dependency the compensation needs: proof that it runs on the provider, with DI. */
@Injectable()
class PaymentGateway {
  readonly refunds: string[] = [];
  refund(chargeId: string, step: string) {
    this.refunds.push(`${step}:${chargeId}`);
  }
}

@Injectable()
class CheckoutWorkflows {
  constructor(private readonly payments: PaymentGateway) {}

  @Workflow({ name: 'nest-checkout', maxConcurrency: Infinity })
  async checkout({ input }: WorkflowContext<{ order: string }>) {
    const charge = await this.charge(input.order);
    await this.ship(input.order);
    return charge;
  }

  @Step({ compensate: 'refundCharge' })
  async charge(order: string) {
    return { chargeId: `ch-${order}` };
  }

  async refundCharge(output: { chargeId: string }, ctx: CompensationContext) {
    this.payments.refund(output.chargeId, ctx.step);
  }

  @Step('ship')
  async ship(order: string) {
    throw new NonRetriableError(`no carrier for ${order}`);
  }
}

describe('@Step({ compensate })', () => {
  const nest = nestAppPerTest('nest');
  const { redis } = nest;

  it('runs the named method of the same provider, with its injected dependencies, when the run fails', async () => {
    const app = await nest.start({
      imports: [
        RedflowModule.forRoot({
          app: 'shop',
          connection: redis,
          prefix: nest.prefix,
          worker: { runtime: { leaseMs: 1000, heartbeatMs: 250, reaperIntervalMs: 100, blockTimeoutMs: 100 } },
        }),
      ],
      providers: [PaymentGateway, CheckoutWorkflows],
    });
    const client = app.get(RedflowClient);
    const handle = await client.run(CheckoutWorkflows, 'checkout', { order: 'o-7' });
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('no carrier for o-7');
    await eventually(async () => (await client.getRun(handle.id))?.compensated === true);
    expect(app.get(PaymentGateway).refunds).toEqual(['charge:ch-o-7']);
    expect(await client.getRun(handle.id)).toMatchObject({ status: 'failed', compensated: true });
  });

  it('refuses a compensate that names no method of the class when the class is decorated', () => {
    const decorate =
      (compensate: unknown, extra: object = {}) =>
      () => {
        class Service {
          charge() {}
          refund() {}
        }
        const descriptor = Object.getOwnPropertyDescriptor(Service.prototype, 'charge')!;
        Step({ compensate, ...extra } as never)(Service.prototype, 'charge', descriptor);
      };
    expect(decorate('refund')).not.toThrow();
    expect(decorate('refnud')).toThrow(ConfigurationError);
    expect(decorate('refnud')).toThrow('@Step compensate of Service.charge must name a method of the same class, got "refnud"');
    expect(decorate(() => undefined)).toThrow(ConfigurationError);
    expect(decorate(undefined, { compensateRetries: { maxAttempts: 2 } })).toThrow('has compensateRetries but no compensate method');
  });

  it('checks at compile time that compensate names a method of the class (this file compiles only if the misspelt one is an error)', () => {
    class Typed {
      @Step({ name: 'reserve', compensate: 'release' })
      reserve() {
        return 'reserved';
      }
      release() {}
    }
    const misspelt = () => {
      class Misspelt {
        // @ts-expect-error 'relase' is no method of Misspelt: the decorator does not type-check.
        @Step({ name: 'reserve', compensate: 'relase' })
        reserve() {
          return 'reserved';
        }
        release() {}
      }
      return Misspelt;
    };
    expect(typeof Typed.prototype.reserve).toBe('function');
    // At run time the same mistake is a ConfigurationError when the class is decorated.
    expect(misspelt).toThrow(ConfigurationError);
  });
});
