import 'reflect-metadata';

import { Injectable } from '@nestjs/common';
import { Test } from '@nestjs/testing';

import { OnEvent, RedflowClient, Step, Workflow, type WorkflowContext } from '../../lib';
import { RedflowTesting, RedflowTestingModule } from '../../lib/testing';
import { isAlive } from '../../lib/testing/redis-server';

@Injectable()
class ApprovalWorkflows {
  readonly notified: string[] = [];

  @Workflow({ name: 'approval' })
  async approval({ step, input }: WorkflowContext<{ doc: string }>) {
    const reviewer = await this.pickReviewer(input.doc);
    const verdict = await step.waitForSignal<{ ok: boolean }>('decision', 'decided', { timeout: '2d' });
    await step.sleep('grace', '1h');
    return { reviewer, ok: verdict?.ok ?? false };
  }

  @Step('pick-reviewer')
  async pickReviewer(doc: string): Promise<string> {
    return `reviewer of ${doc}`;
  }

  @Workflow({ name: 'on-signup' })
  @OnEvent('user.signed-up')
  async onSignup({ input }: WorkflowContext<{ email: string }>) {
    this.notified.push(input.email);
    return input.email;
  }
}

/** RedflowTestingModule: no Redis given, so it starts its own; the virtual clock; signals and events. */
describe('RedflowTestingModule', () => {
  const saved = process.env.REDIS_URL;
  beforeAll(() => delete process.env.REDIS_URL);
  afterAll(() => {
    if (saved !== undefined) process.env.REDIS_URL = saved;
  });

  it('runs workflows with mocks, signals, events and the clock, and stops its redis-server on close', async () => {
    const moduleRef = await Test.createTestingModule({ imports: [RedflowTestingModule.forRoot()], providers: [ApprovalWorkflows] }).compile();
    await moduleRef.init();
    const testing = moduleRef.get(RedflowTesting);
    const workflows = moduleRef.get(ApprovalWorkflows);
    expect(moduleRef.get(RedflowClient)).toBe(testing.client);

    const waiting = await testing.run(ApprovalWorkflows, 'approval', { doc: 'spec' }, { steps: { pickReviewer: { output: 'ann' } } });
    expect(waiting.status).toBe('waiting');
    expect(waiting.waits).toEqual([expect.objectContaining({ name: 'decision', signal: 'decided' })]);
    await testing.signal(waiting.runId, 'decided', { ok: true });
    const grace = await testing.runUntilWaiting(waiting.runId);
    expect(grace.waits.map((s) => s.name)).toEqual(['grace']);
    await testing.clock.advance('1h');
    expect(await testing.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'succeeded', output: { reviewer: 'ann', ok: true } });

    const [runId] = await testing.emit('user.signed-up', { email: 'bo@example.com' });
    expect(await testing.runUntilWaiting(runId)).toMatchObject({ status: 'succeeded', output: 'bo@example.com' });
    expect(workflows.notified).toEqual(['bo@example.com']);

    const pid = testing.redisServer!.pid;
    expect(isAlive(pid)).toBe(true);
    await moduleRef.close();
    expect(isAlive(pid)).toBe(false);
  });
});
