import 'reflect-metadata';

import { Injectable, Scope, type Provider } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { IsString } from 'class-validator';

import { ConfigurationError, Cron, OnEvent, RedflowClient, RedflowModule, Workflow, WorkflowRegistry, type WorkflowContext } from '../../lib';
import { RedflowMetadataAccessor } from '../../lib/nest/redflow-metadata.accessor';
import { RedflowExplorer } from '../../lib/nest/redflow.explorer';
import { FAST_RUNTIME } from '../support/engine';
import { nestAppPerTest } from '../support/nest-app';

class GreetDto {
  @IsString() who!: string;
}

@Injectable()
class Greeter {
  readonly greeting = 'hello';
}

@Injectable()
class GreetingWorkflows {
  constructor(private readonly greeter: Greeter) {}

  @OnEvent('user.joined')
  @Cron('0 0 9 * * *', { id: 'morning' })
  @Workflow({ name: 'greet', input: GreetDto, maxConcurrency: 3, onFailure: 'cleanUp' })
  greet({ input }: WorkflowContext<GreetDto>) {
    return `${this.greeter.greeting} ${input.who}`;
  }

  @Workflow()
  unnamed() {
    return 1;
  }

  cleanUp() {
    return 'cleaned';
  }
}

async function explore(...providers: Provider[]): Promise<WorkflowRegistry> {
  const module = await Test.createTestingModule({
    imports: [DiscoveryModule],
    providers: [RedflowExplorer, RedflowMetadataAccessor, ...providers],
  }).compile();
  const registry = new WorkflowRegistry();
  try {
    module.get(RedflowExplorer).explore(registry);
  } finally {
    await module.close();
  }
  return registry;
}

describe('RedflowExplorer', () => {
  it('defines each @Workflow method with its options, triggers and the provider as `this`', async () => {
    const registry = await explore(Greeter, GreetingWorkflows);
    expect(
      registry
        .list()
        .map((d) => d.name)
        .sort(),
    ).toEqual(['GreetingWorkflows.unnamed', 'greet']);
    const greet = registry.get('greet')!;
    expect(greet.maxConcurrency).toBe(3);
    expect(greet.options.schema).toBe(GreetDto);
    expect(greet.options.event).toEqual([{ name: 'user.joined' }]);
    expect(greet.options.cron).toEqual([{ id: 'morning', expression: '0 0 9 * * *' }]);
    const step = { run: jest.fn() } as unknown as WorkflowContext<unknown>['step'];
    const output = await greet.handler({
      input: { who: 'ada' },
      run: { id: 'r', workflow: 'greet', queue: 'default', attempt: 1, maxAttempts: 1 },
      signal: new AbortController().signal,
      step,
      setEvent: async () => undefined,
    });
    expect(output).toBe('hello ada');
    expect(await greet.options.onFailure!({ error: new Error('x'), run: {} as never, input: null })).toBe('cleaned');
  });

  it('rejects two workflows with one name, naming both methods', async () => {
    @Injectable()
    class A {
      @Workflow('same')
      one() {}
    }
    @Injectable()
    class B {
      @Workflow('same')
      two() {}
    }
    await expect(explore(A, B)).rejects.toThrow(new ConfigurationError('Workflow "same" is defined twice (A.one and B.two). Rename one of them.'));
  });

  it('rejects @Cron or @OnEvent on a method without @Workflow', async () => {
    @Injectable()
    class Lonely {
      @Cron('* * * * *')
      tick() {}
    }
    @Injectable()
    class Listener {
      @OnEvent('x')
      on() {}
    }
    await expect(explore(Lonely)).rejects.toThrow('Lonely.tick has @Cron but no @Workflow. Add @Workflow() to Lonely.tick: triggers start workflows.');
    await expect(explore(Listener)).rejects.toThrow('Listener.on has @OnEvent but no @Workflow.');
  });

  it('rejects a @Workflow in a request-scoped provider', async () => {
    @Injectable({ scope: Scope.REQUEST })
    class PerRequest {
      @Workflow('per-request')
      run() {}
    }
    await expect(explore(PerRequest)).rejects.toThrow(
      'PerRequest.run is a @Workflow in a request-scoped provider. Workflows run outside any request: make PerRequest a default-scoped provider and pass request data in the input.',
    );
  });

  it('rejects an onFailure naming a method that does not exist', async () => {
    @Injectable()
    class Broken {
      // @ts-expect-error 'nope' is no method of Broken: a compile error in TypeScript, a ConfigurationError at startup otherwise.
      @Workflow({ name: 'broken', onFailure: 'nope' })
      run() {}
    }
    await expect(explore(Broken)).rejects.toThrow('onFailure of Broken.run names "nope", which is not a method of Broken. Name a method of the same provider.');
  });

  describe('useValue and useFactory providers', () => {
    class Tax {
      constructor(readonly rate: number) {}
    }

    // Not @Injectable: built by hand for useValue and useFactory.
    class PricingWorkflows {
      constructor(
        private readonly tax: Tax,
        readonly label = 'pricing',
      ) {}

      @Workflow('price')
      price({ input }: WorkflowContext<{ cents: number }>) {
        return { label: this.label, total: Math.round(input.cents * (1 + this.tax.rate)) };
      }
    }

    class ValueWorkflows {
      readonly greeting = 'hi from useValue';

      @Workflow()
      hello({ input }: WorkflowContext<string>) {
        return `${this.greeting}, ${input}`;
      }
    }

    it('defines workflows of useValue and useFactory providers, with string and Symbol tokens', async () => {
      const TOKEN = Symbol('pricing');
      const registry = await explore(
        { provide: 'values', useValue: new ValueWorkflows() },
        { provide: Tax, useValue: new Tax(0.5) },
        { provide: TOKEN, useFactory: (tax: Tax) => new PricingWorkflows(tax, 'symbol'), inject: [Tax] },
      );
      expect(
        registry
          .list()
          .map((d) => d.name)
          .sort(),
      ).toEqual(['ValueWorkflows.hello', 'price']);
    });

    it('explores an instance registered under two tokens once', async () => {
      const shared = new ValueWorkflows();
      const registry = await explore(
        { provide: 'a', useValue: shared },
        { provide: 'b', useValue: shared },
        { provide: 'c', useFactory: (value: ValueWorkflows) => value, inject: ['a'] },
        { provide: 'd', useExisting: 'a' },
      );
      expect(registry.list().map((d) => d.name)).toEqual(['ValueWorkflows.hello']);
    });

    it('still rejects one workflow name on two distinct instances', async () => {
      await expect(explore({ provide: 'a', useValue: new ValueWorkflows() }, { provide: 'b', useFactory: () => new ValueWorkflows() })).rejects.toThrow(
        new ConfigurationError('Workflow "ValueWorkflows.hello" is defined twice (ValueWorkflows.hello and ValueWorkflows.hello). Rename one of them.'),
      );
    });

    it('ignores null, undefined, primitive, function and prototype-less values', async () => {
      const registry = await explore(
        { provide: 'number', useValue: 42 },
        { provide: 'string', useValue: 'text' },
        { provide: 'boolean', useValue: false },
        { provide: 'symbol', useValue: Symbol('s') },
        { provide: 'null', useValue: null },
        { provide: 'undefined', useValue: undefined },
        { provide: 'class', useValue: ValueWorkflows },
        { provide: 'bare', useValue: Object.create(null) },
        { provide: 'plain', useValue: { run: () => 1 } },
        { provide: 'factory-string', useFactory: () => 'made' },
        { provide: 'factory-null', useFactory: () => null },
        { provide: 'factory-async-number', useFactory: async () => 7 },
      );
      expect(registry.list()).toEqual([]);
    });

    it('rejects a @Workflow in a request-scoped useClass provider', async () => {
      @Injectable({ scope: Scope.REQUEST })
      class PerRequestImpl {
        @Workflow('per-request')
        run() {}
      }
      await expect(explore({ provide: 'per-request', useClass: PerRequestImpl })).rejects.toThrow(
        'PerRequestImpl.run is a @Workflow in a request-scoped provider.',
      );
    });

    describe('end to end', () => {
      const nest = nestAppPerTest('nest:explorer');
      const { redis } = nest;

      it('runs workflows of a useValue provider and of a useFactory provider with an injected dependency', async () => {
        const value = new ValueWorkflows();
        const app = await nest.start({
          imports: [RedflowModule.forRoot({ app: 'explorer', connection: redis, prefix: nest.prefix, worker: { runtime: FAST_RUNTIME } })],
          providers: [
            { provide: 'VALUE_WORKFLOWS', useValue: value },
            { provide: 'TAX', useValue: new Tax(0.2) },
            { provide: PricingWorkflows, useFactory: (tax: Tax) => new PricingWorkflows(tax, 'built by factory'), inject: ['TAX'] },
            { provide: 'answer', useValue: 42 },
            { provide: 'greeting', useFactory: () => 'a string' },
          ],
        });
        const client = app.get(RedflowClient);

        const hello = await client.runByName<string>('ValueWorkflows.hello', 'ada');
        await expect(hello.result({ timeoutMs: 5000 })).resolves.toBe('hi from useValue, ada');

        const price = await client.runByName<{ label: string; total: number }>('price', { cents: 1000 });
        await expect(price.result({ timeoutMs: 5000 })).resolves.toEqual({ label: 'built by factory', total: 1200 });
        // The class-based client entry point resolves the name the same way.
        const again = await client.run(PricingWorkflows, 'price', { cents: 50 });
        await expect(again.result({ timeoutMs: 5000 })).resolves.toEqual({ label: 'built by factory', total: 60 });

        expect((await client.listWorkflows()).map((w) => w.name).sort()).toEqual(['ValueWorkflows.hello', 'price']);
      });
    });
  });
});
