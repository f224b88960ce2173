import 'reflect-metadata';

import { Reflector } from '@nestjs/core';

import { Cron, OnEvent, Step, Workflow } from '../../lib';
import { RedflowMetadataAccessor } from '../../lib/nest/redflow-metadata.accessor';

class Orders {
  @OnEvent('order.created')
  @OnEvent('order.updated')
  @Cron('*/5 * * * * *', { id: 'five', timezone: 'UTC', input: { a: 1 } })
  @Workflow({ name: 'orders.sync', queue: 'ops', maxConcurrency: 2 })
  sync() {
    return 'synced';
  }

  @Workflow('plain')
  plain() {
    return 1;
  }

  @Step()
  defaultNamed(x: number) {
    return x * 2;
  }

  @Step({ name: 'charge', timeoutMs: 500 })
  charge() {
    return 'charged';
  }

  undecorated() {
    return 0;
  }
}

describe('RedflowMetadataAccessor', () => {
  const accessor = new RedflowMetadataAccessor(new Reflector());
  const proto = Orders.prototype;

  it('reads @Workflow options, in either form', () => {
    expect(accessor.getWorkflow(proto.sync)).toEqual({ name: 'orders.sync', queue: 'ops', maxConcurrency: 2 });
    expect(accessor.getWorkflow(proto.plain)).toEqual({ name: 'plain' });
    expect(accessor.getWorkflow(proto.undecorated)).toBeUndefined();
  });

  it('reads repeated @OnEvent names in declaration order and @Cron triggers', () => {
    expect(accessor.getEvents(proto.sync)).toEqual(['order.updated', 'order.created']);
    expect(accessor.getCrons(proto.sync)).toEqual([{ id: 'five', timezone: 'UTC', input: { a: 1 }, expression: '*/5 * * * * *' }]);
    expect(accessor.getEvents(proto.plain)).toEqual([]);
    expect(accessor.getCrons(proto.plain)).toEqual([]);
  });

  it('reads @Step options, defaulting the name to the method name', () => {
    expect(accessor.getStep(proto.defaultNamed)).toEqual({ name: 'defaultNamed', timeout: undefined });
    expect(accessor.getStep(proto.charge)).toEqual({ name: 'charge', timeout: 500 });
    expect(accessor.getStep(proto.undecorated)).toBeUndefined();
  });

  it('leaves a @Step method callable as before outside a workflow run', async () => {
    expect(await new Orders().defaultNamed(21)).toBe(42);
    expect(proto.defaultNamed.name).toBe('defaultNamed');
  });
});
