import 'reflect-metadata';
import { Injectable, Scope, type Type } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';
import { ConfigurationError, Cron, OnEvent, Workflow, WorkflowRegistry, type WorkflowContext } from '../../lib';
import { RedflowExplorer } from '../../lib/nest/redflow.explorer';
import { RedflowMetadataAccessor } from '../../lib/nest/redflow-metadata.accessor';
import { IsString } from 'class-validator';

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

async function explore(...providers: Type[]): Promise<WorkflowRegistry> {
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
    expect(registry.list().map((d) => d.name).sort()).toEqual(['GreetingWorkflows.unnamed', 'greet']);
    const greet = registry.get('greet')!;
    expect(greet.maxConcurrency).toBe(3);
    expect(greet.options.schema).toBe(GreetDto);
    expect(greet.options.event).toEqual([{ name: 'user.joined' }]);
    expect(greet.options.cron).toEqual([{ id: 'morning', expression: '0 0 9 * * *' }]);
    const step = { run: jest.fn() } as unknown as WorkflowContext<unknown>['step'];
    const output = await greet.handler({ input: { who: 'ada' }, run: { id: 'r', workflow: 'greet', queue: 'default', attempt: 1, maxAttempts: 1 }, signal: new AbortController().signal, step });
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
      @Workflow({ name: 'broken', onFailure: 'nope' })
      run() {}
    }
    await expect(explore(Broken)).rejects.toThrow('onFailure of Broken.run names "nope", which is not a method of Broken. Name a method of the same provider.');
  });
});
