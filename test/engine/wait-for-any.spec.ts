import { CanceledError, ConfigurationError, type WorkflowContext } from '../../lib';
import { eventually, TestEngine } from '../support/engine';

/**
 * `step.waitForAny`: the first of a signal, a timer and a child run wins; the run waits without a
 * worker slot, the winner is stored with the step (so a replay or another worker returns it), and
 * the losers are unregistered: a later signal stays buffered, a losing child is canceled or
 * abandoned.
 */
describe('step.waitForAny', () => {
  let engine: TestEngine;
  beforeEach(() => (engine = new TestEngine()));
  afterEach(() => engine.close());

  const statusOf = async (id: string) => (await engine.client.getRun(id))?.status;
  const stepOf = async (id: string, name: string) => (await engine.client.getRunSteps(id)).find((s) => s.name === name);
  /** The run's hash fields that still register a race branch: `sigwait:*` and `r:*`. */
  const raceFields = async (id: string) =>
    Object.keys(await engine.redis.hgetall(engine.client.keys.run(id))).filter((f) => f.startsWith('sigwait:') || f.startsWith('r:'));

  /** A child that waits for the signal "go" and returns its payload. */
  const defineHeld = () => engine.registry.define('held', {}, async ({ step }) => step.waitForSignal<string>('go', 'go'));

  it('the signal wins: its payload is the value, the losing child is canceled and the timer is ignored', async () => {
    const held = defineHeld();
    const review = engine.registry.define('review', {}, async ({ step }) => {
      const result = await step.waitForAny('decision', {
        approved: step.signal<{ by: string }>('approved'),
        timeout: step.timer('1h'),
        child: step.child(held, {}),
      });
      // The result is typed from the branches: the key narrows the value.
      if (result.key === 'approved') return { key: result.key, by: result.value.by };
      // @ts-expect-error "rejected" is not a branch of this race
      if (result.key === 'rejected') return null;
      if (result.key === 'child') return { key: result.key, child: result.value satisfies string | null };
      return { key: result.key, timeout: result.value satisfies null };
    });
    await engine.worker({ concurrency: 2 });
    const handle = await engine.client.start(review, {});
    const childId = `${handle.id}.decision.child`;
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
    expect(await stepOf(handle.id, 'decision')).toMatchObject({ status: 'waiting', wakeAt: expect.any(Number) });

    expect(await engine.client.signal(handle.id, 'approved', { by: 'ann' })).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'approved', by: 'ann' });
    expect(await stepOf(handle.id, 'decision')).toMatchObject({ status: 'succeeded', output: { key: 'approved', value: { by: 'ann' } } });
    const child = (await engine.client.getRun(childId))!;
    expect(child.status).toBe('canceled');
    expect(child.error).toMatchObject({
      name: 'CanceledError',
      message: `Run "${childId}" was canceled because it lost the race of step "decision" of run "${handle.id}".`,
    });
    // Nothing is left registered: no signal wait, no branches field, no waiter on the child.
    expect(await raceFields(handle.id)).toEqual([]);
    expect(await engine.redis.scard(engine.client.keys.waiters(childId))).toBe(0);
  });

  it('the timer wins: a signal sent afterwards stays buffered, and a later waitForSignal of the same name receives it', async () => {
    const patient = engine.registry.define('patient', {}, async ({ step }) => {
      const race = await step.waitForAny('decision', { approved: step.signal<string>('approved'), timeout: step.timer(150) });
      await step.sleep('pause', 400);
      const later = await step.waitForSignal<string>('later', 'approved');
      return { race, later };
    });
    await engine.worker();
    const handle = await engine.client.start(patient, {});
    await eventually(async () => (await stepOf(handle.id, 'decision'))?.status === 'succeeded');
    expect(await stepOf(handle.id, 'decision')).toMatchObject({ output: { key: 'timeout', value: null } });
    expect(await raceFields(handle.id)).toEqual([]);

    // The race is over: the signal no longer has a wait, so it is buffered (the run sleeps in "pause").
    expect(await engine.client.signal(handle.id, 'approved', 'late')).toBe(true);
    expect(await engine.redis.lrange(engine.client.keys.signals(handle.id), 0, -1)).toEqual(['approved\n"late"']);
    expect(await stepOf(handle.id, 'decision')).toMatchObject({ output: { key: 'timeout', value: null } });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ race: { key: 'timeout', value: null }, later: 'late' });
  });

  it('the child wins: its output is the value (a child that ends while its parent waits, and a quick one)', async () => {
    const held = defineHeld();
    const quick = engine.registry.define('quick', {}, ({ input }: WorkflowContext<{ n: number }>) => ({ doubled: input.n * 2 }));
    const parent = engine.registry.define('parent', {}, async ({ step }) => {
      const slow = await step.waitForAny('slow', { child: step.child(held, {}), approved: step.signal('approved'), timeout: step.timer('1h') });
      const fast = await step.waitForAny('fast', { timeout: step.timer('1h'), child: step.child(quick, { n: 21 }) });
      return { slow, fast };
    });
    await engine.worker({ concurrency: 3 });
    const handle = await engine.client.start(parent, {});
    const childId = `${handle.id}.slow.child`;
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
    expect(await engine.client.signal(childId, 'go', 'child done')).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({
      slow: { key: 'child', value: 'child done' },
      fast: { key: 'child', value: { doubled: 42 } },
    });
    expect(await statusOf(childId)).toBe('succeeded');
    expect(await raceFields(handle.id)).toEqual([]);
  });

  it('a child that fails first makes the step throw its error', async () => {
    const broken = engine.registry.define('broken', { retries: { maxAttempts: 1 } }, () => {
      throw new Error('child broke');
    });
    const parent = engine.registry.define('parent', { retries: { maxAttempts: 1 } }, async ({ step }) =>
      step.waitForAny('race', { child: step.child(broken, {}), timeout: step.timer('1h') }),
    );
    await engine.worker({ concurrency: 2 });
    const handle = await engine.client.start(parent, {});
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow('child broke');
    expect(await stepOf(handle.id, 'race')).toMatchObject({ status: 'failed', error: expect.objectContaining({ message: 'child broke' }) });
  });

  it("a child branch of a workflow at version 2 starts on that version's queue and wins", async () => {
    const child = engine.registry.define('v2-child', { version: 2 }, async () => 'from v2');
    const parent = engine.registry.define('race-v2', {}, async ({ step }) =>
      step.waitForAny('pick', { child: step.child(child, {}), timeout: step.timer('1h') }),
    );
    await engine.worker();
    const handle = await engine.client.start(parent, {});
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'child', value: 'from v2' });
    expect(await engine.client.getRun(`${handle.id}.pick.child`)).toMatchObject({ status: 'succeeded', version: 2, queue: 'default' });
  });

  it("onLose: 'abandon': the losing child keeps running and completes", async () => {
    const held = defineHeld();
    const parent = engine.registry.define('parent', {}, async ({ step }) =>
      step.waitForAny('race', { approved: step.signal('approved'), child: step.child(held, {}, { onLose: 'abandon' }) }),
    );
    await engine.worker({ concurrency: 2 });
    const handle = await engine.client.start(parent, {});
    const childId = `${handle.id}.race.child`;
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
    expect(await engine.client.signal(handle.id, 'approved', 'yes')).toBe(true);
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'approved', value: 'yes' });
    expect(await statusOf(childId)).toBe('scheduled');
    // No longer the parent's child: not canceled with it, and its end reaches no parent.
    expect(await engine.redis.sismember(engine.client.keys.children(handle.id), childId)).toBe(0);
    expect(await engine.client.signal(childId, 'go', 'finished anyway')).toBe(true);
    await expect(engine.client.handle(childId).result({ timeoutMs: 5_000 })).resolves.toBe('finished anyway');
    expect(await stepOf(handle.id, 'race')).toMatchObject({ output: { key: 'approved', value: 'yes' } });
  });

  it('a worker restart during the race changes no outcome: the next worker ends the race the signal won', async () => {
    const held = defineHeld();
    const parent = engine.registry.define('parent', {}, async ({ step }) =>
      step.waitForAny('race', { approved: step.signal<string>('approved'), timeout: step.timer('1h'), child: step.child(held, {}) }),
    );
    const first = await engine.worker({ concurrency: 2 });
    const handle = await engine.client.start(parent, {});
    const childId = `${handle.id}.race.child`;
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
    await first.stop();

    // No worker: the signal is written into the race's record as its winner, and the run is queued.
    expect(await engine.client.signal(handle.id, 'approved', 'while down')).toBe(true);
    expect(await statusOf(handle.id)).toBe('queued');
    expect(await stepOf(handle.id, 'race')).toMatchObject({ status: 'succeeded', output: { key: 'approved', value: 'while down' } });
    // A second signal of the same name finds the race decided: it is buffered, not a second winner.
    expect(await engine.client.signal(handle.id, 'approved', 'second')).toBe(true);

    await engine.worker({ concurrency: 2 });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'approved', value: 'while down' });
    expect(await statusOf(childId)).toBe('canceled');
    expect(await raceFields(handle.id)).toEqual([]);
  });

  it('a replay after the race returns the recorded winner without waiting again', async () => {
    let handlerRuns = 0;
    let failures = 0;
    const parent = engine.registry.define('parent', { retries: { maxAttempts: 2, delay: 50 }, stepRetries: { maxAttempts: 1 } }, async ({ step }) => {
      handlerRuns++;
      const race = await step.waitForAny('race', { approved: step.signal<string>('approved'), timeout: step.timer('1h') });
      await step.run('after', () => {
        if (failures++ === 0) throw new Error('once');
      });
      return race;
    });
    await engine.worker();
    const handle = await engine.client.start(parent, {});
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled');
    expect(await engine.client.signal(handle.id, 'approved', 'ok')).toBe(true);
    // The retry would wait an hour if it raced again: it returns the stored winner.
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ key: 'approved', value: 'ok' });
    // Three handler runs: the race waits, the signal wakes it (then "after" fails), the retry replays.
    expect(handlerRuns).toBe(3);
    expect(failures).toBe(2);
    expect((await engine.client.getRun(handle.id))!.attempt).toBe(2);
    expect(await stepOf(handle.id, 'race')).toMatchObject({ attempt: 1, output: { key: 'approved', value: 'ok' } });
  });

  it('an event branch wins with a payload that matches; a race another branch won leaves no event wait behind', async () => {
    const parent = engine.registry.define('parent', {}, async ({ step }) => {
      const paid = await step.waitForAny('paid', {
        payment: step.event<{ order: string; amount: number }>('payment.received', { match: { order: 'o-1' } }),
        timeout: step.timer('1h'),
      });
      const approved = await step.waitForAny('approved', { approved: step.signal<string>('approved'), payment: step.event('payment.received') });
      await step.sleep('pause', 1_000);
      return { paid, approved };
    });
    await engine.worker();
    const handle = await engine.client.start(parent, {});
    await eventually(async () => (await stepOf(handle.id, 'paid'))?.status === 'waiting' && (await statusOf(handle.id)) === 'scheduled');
    await engine.client.emitEvent('payment.received', { order: 'o-2', amount: 1 });
    await engine.client.emitEvent('payment.received', { order: 'o-1', amount: 30 });
    await eventually(async () => (await stepOf(handle.id, 'approved'))?.status === 'waiting' && (await statusOf(handle.id)) === 'scheduled');
    expect(await engine.redis.hgetall(engine.client.keys.eventShapes('payment.received'))).toEqual({ '': '1' });
    expect(await engine.client.signal(handle.id, 'approved', 'yes')).toBe(true);
    await eventually(async () => (await stepOf(handle.id, 'pause'))?.status === 'waiting');
    // The race is over and the run still goes on: its losing event branch is no longer registered.
    expect(await engine.redis.hlen(engine.client.keys.eventShapes('payment.received'))).toBe(0);
    expect(await engine.redis.scard(engine.client.keys.eventWaitsOf(handle.id))).toBe(0);
    await engine.client.emitEvent('payment.received', { order: 'o-3', amount: 5 });
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({
      paid: { key: 'payment', value: { order: 'o-1', amount: 30 } },
      approved: { key: 'approved', value: 'yes' },
    });
  });

  it('a timer that is due when the race is reached wins at once, and a buffered signal beats it', async () => {
    const parent = engine.registry.define('parent', {}, async ({ step }) => {
      const due = await step.waitForAny('due', { approved: step.signal('approved'), timeout: step.timer(new Date(0)) });
      const buffered = await step.waitForAny('buffered', { approved: step.signal('approved'), timeout: step.timer(new Date(0)) });
      return { due, buffered };
    });
    const handle = await engine.client.start(parent, {});
    // Sent before any worker runs the race: buffered, then taken by the first race (it is checked first).
    expect(await engine.client.signal(handle.id, 'approved', 'early')).toBe(true);
    await engine.worker();
    await expect(handle.result({ timeoutMs: 5_000 })).resolves.toEqual({ due: { key: 'approved', value: 'early' }, buffered: { key: 'timeout', value: null } });
  });

  it("a timer of three days wins when the test engine's virtual clock advances three days", async () => {
    const review = engine.define('review', {}, async ({ step }) =>
      step.waitForAny('decision', { approved: step.signal('approved'), timeout: step.timer('3d') }),
    );
    const waiting = await engine.run(review, {});
    expect(waiting.status).toBe('waiting');
    expect(waiting.waits.map((s) => s.name)).toEqual(['decision']);
    await engine.clock.advance('2d');
    expect(await engine.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'waiting' });
    await engine.clock.advance('1d');
    expect(await engine.runUntilWaiting(waiting.runId)).toMatchObject({ status: 'succeeded', output: { key: 'timeout', value: null } });
  });

  it('wait-any decides in one script: a child that already ended wins at once, a late signal beats a due timer, and a retried call changes nothing', async () => {
    const parent = engine.registry.define('parent', {}, () => 'unused');
    const handle = await engine.client.start(parent, {}, { runAt: Date.now() + 3_600_000 });
    const runKey = engine.client.keys.run(handle.id);
    // As a worker holding the run's lease would call it.
    await engine.redis.hset(runKey, 'status', 'running', 'lease', 'claim-token');
    const target = (field: string) => ({ runId: handle.id, token: 'claim-token', field, seq: 1, attempt: 1 });
    const now = Date.now();

    // A child branch whose run has already ended: decided in the first call, the branch never registered.
    await engine.redis.hset(engine.client.keys.run('ended-child'), 'status', 'succeeded', 'output', '{"n":7}');
    const ended = await engine.client.scripts.waitAny(target('s:ended'), now, {
      record: `[6,1,1,${now + 60_000}]`,
      branches: '[["t","t",' + (now + 60_000) + '],["c","c","ended-child","cancel"]]',
    });
    expect(ended.code).toBe('done');
    expect(JSON.parse(ended.record)).toEqual([1, 1, 1, now, 0, { key: 'c', value: { n: 7 } }]);
    expect(await engine.redis.hexists(runKey, 'r:ended')).toBe(0);
    expect(await engine.client.scripts.waitAny(target('s:ended'), now + 1, { record: '[6,2,1,0]', branches: '[]' })).toEqual(ended);

    // A race waiting for a signal and a timer: the signal comes after the deadline but before the
    // worker's call on wake. It won first, so the timer cannot win.
    const due = now + 50;
    const waiting = await engine.client.scripts.waitAny(target('s:race'), now, {
      record: `[6,1,1,${due}]`,
      branches: `[["approved","s","approved"],["timeout","t",${due}]]`,
    });
    expect(waiting).toEqual({ code: 'wait', record: `[6,1,1,${due}]` });
    expect(await engine.redis.hget(runKey, 'sigwait:approved')).toBe('s:race');
    expect(await engine.client.signal(handle.id, 'approved', 'late')).toBe(true);
    const woken = await engine.client.scripts.waitAny(target('s:race'), due + 1_000);
    expect(woken.code).toBe('done');
    expect(JSON.parse(woken.record)[5]).toEqual({ key: 'approved', value: 'late' });
    expect(await engine.redis.hexists(runKey, 'sigwait:approved')).toBe(0);
    expect(await engine.client.scripts.waitAny(target('s:race'), due + 2_000)).toEqual(woken);
    // Another signal of that name is buffered for a later wait.
    expect(await engine.client.signal(handle.id, 'approved', 'again')).toBe(true);
    expect(await engine.redis.lrange(engine.client.keys.signals(handle.id), 0, -1)).toEqual(['approved\n"again"']);
    // Another lease holder is refused.
    expect((await engine.client.scripts.waitAny({ ...target('s:other'), token: 'other' }, now)).code).toBe('lost');
  });

  it('refuses bad branches with a ConfigurationError naming the step and the branch', async () => {
    const cases: Array<[string, (ctx: WorkflowContext) => Promise<unknown>, string]> = [
      ['none', ({ step }) => step.waitForAny('race', {}), 'step.waitForAny "race" has no branches: give at least one'],
      [
        'not-a-branch',
        ({ step }) => step.waitForAny('race', { approved: 'approved' } as never),
        'Branch "approved" of step.waitForAny "race" is "approved", not a branch: make it with step.signal(name), step.timer(duration), step.child(workflow, input) or step.event(name).',
      ],
      [
        'look-alike',
        ({ step }) => step.waitForAny('race', { approved: { kind: 'signal', signal: 'approved' } }),
        'Branch "approved" of step.waitForAny "race" is',
      ],
      ['not-an-object', ({ step }) => step.waitForAny('race', null as never), 'step.waitForAny "race" needs an object of branches, got null'],
      [
        'same-signal',
        ({ step }) => step.waitForAny('race', { a: step.signal('go'), b: step.signal('go') }),
        'Branches "a" and "b" of step.waitForAny "race" both wait for signal "go": give each signal one branch.',
      ],
      [
        'bad-on-lose',
        ({ step }) => step.waitForAny('race', { c: step.child('x', {}, { onLose: 'ignore' as never }) }),
        "onLose of step.child must be 'cancel' or 'abandon', got \"ignore\".",
      ],
    ];
    await engine.worker({ concurrency: 5 });
    for (const [name, handler, message] of cases) {
      const wf = engine.registry.define(name, { retries: { maxAttempts: 1 } }, handler);
      const error = await (await engine.client.start(wf, {})).result({ timeoutMs: 5_000 }).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(ConfigurationError);
      expect((error as Error).message).toContain(message);
    }
  });

  it('canceling the parent during the race cancels its child', async () => {
    const held = defineHeld();
    const parent = engine.registry.define('parent', {}, async ({ step }) =>
      step.waitForAny('race', { child: step.child(held, {}), timeout: step.timer('1h') }),
    );
    await engine.worker({ concurrency: 2 });
    const handle = await engine.client.start(parent, {});
    const childId = `${handle.id}.race.child`;
    await eventually(async () => (await statusOf(handle.id)) === 'scheduled' && (await statusOf(childId)) === 'scheduled');
    await engine.client.cancelRun(handle.id, { reason: 'no longer needed' });
    await expect(handle.result({ timeoutMs: 5_000 })).rejects.toThrow(CanceledError);
    expect(await statusOf(childId)).toBe('canceled');
  });
});
