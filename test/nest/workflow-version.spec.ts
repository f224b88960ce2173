import 'reflect-metadata';

import { Injectable } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { Test } from '@nestjs/testing';

import { ConfigurationError, Workflow, WorkflowRegistry } from '../../lib';
import { RedflowMetadataAccessor } from '../../lib/nest/redflow-metadata.accessor';
import { RedflowExplorer } from '../../lib/nest/redflow.explorer';

@Injectable()
class CheckoutWorkflows {
  @Workflow({ name: 'checkout', version: 2, onNonDeterminism: 'retry-latest' })
  checkout() {
    return 'v2';
  }

  @Workflow({ name: 'refund' })
  refund() {
    return 'v1';
  }
}

@Injectable()
class BadVersionWorkflows {
  @Workflow({ name: 'bad', version: 0 })
  bad() {
    return 0;
  }
}

async function explore(provider: new (...args: never[]) => unknown): Promise<WorkflowRegistry> {
  const module = await Test.createTestingModule({ imports: [DiscoveryModule], providers: [RedflowExplorer, RedflowMetadataAccessor, provider] }).compile();
  const registry = new WorkflowRegistry();
  try {
    module.get(RedflowExplorer).explore(registry);
  } finally {
    await module.close();
  }
  return registry;
}

describe('@Workflow({ version })', () => {
  it('defines the workflow at that version (default 1), with onNonDeterminism', async () => {
    const registry = await explore(CheckoutWorkflows);
    expect(registry.get('checkout')).toMatchObject({ version: 2, options: { onNonDeterminism: 'retry-latest' } });
    expect(registry.get('refund')?.version).toBe(1);
  });

  it('refuses a version that is not a positive integer with ConfigurationError', async () => {
    const error = await explore(BadVersionWorkflows).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ConfigurationError);
    expect((error as Error).message).toBe(
      'version of workflow "bad" must be a positive integer (1, 2, 3, ...), got 0. Raise it by one for each deploy that changes the order of the workflow\'s steps.',
    );
  });
});
