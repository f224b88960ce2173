import 'reflect-metadata';

import { Injectable } from '@nestjs/common';

import { ConfigurationError, RedflowClient, RedflowModule, Step, Workflow, type WorkflowContext } from '../../lib';
import { nestAppPerTest } from '../support/nest-app';

declare const require: (id: string) => unknown;

@Injectable()
class Digests {
  @Workflow('digest')
  async digest({ input }: WorkflowContext<{ text: string; rounds: number }>) {
    return this.hash(input.text, input.rounds);
  }

  /** Runs in a thread: its arguments only, and what it requires. */
  @Step({ sandbox: true })
  hash(text: string, rounds: number): { hex: string; threadId: number } {
    const { createHash } = require('node:crypto') as typeof import('node:crypto');
    const { threadId } = require('node:worker_threads') as typeof import('node:worker_threads');
    let hex = text;
    for (let i = 0; i < rounds; i++) hex = createHash('sha256').update(hex).digest('hex');
    return { hex, threadId };
  }
}

describe('@Step({ sandbox: true })', () => {
  const nest = nestAppPerTest('sandbox-step');

  it('runs the method in a worker thread with its arguments, and stores its result as a step', async () => {
    const app = await nest.start({ imports: [RedflowModule.forRoot({ app: 'digests', connection: nest.redis, prefix: nest.prefix })], providers: [Digests] });
    const client = app.get(RedflowClient);
    const handle = await client.run(Digests, 'digest', { text: 'redflow', rounds: 1000 });
    const output = (await handle.result({ timeout: '10s' })) as { hex: string; threadId: number };
    const { createHash } = await import('node:crypto');
    let expected = 'redflow';
    for (let i = 0; i < 1000; i++) expected = createHash('sha256').update(expected).digest('hex');
    expect(output.hex).toBe(expected);
    expect(output.threadId).toBeGreaterThan(0); // not the main thread (0)
    expect((await client.getRunSteps(handle.id)).map((s) => [s.name, s.status])).toEqual([['hash', 'succeeded']]);
  });

  it('refuses sandbox with heartbeatTimeout, or a sandbox that is not a boolean, when the class is decorated', () => {
    expect(() => Step({ sandbox: true, heartbeatTimeout: '5s' })(Digests.prototype, 'x', { value: () => 1 })).toThrow(ConfigurationError);
    expect(() => Step({ sandbox: 'yes' as never })(Digests.prototype, 'x', { value: () => 1 })).toThrow(
      '@Step sandbox of Digests.x must be true or false, got string.',
    );
  });
});
