import { randomBytes } from 'node:crypto';

import { createClient, RedisWriteRefusedError, startWorker, WorkflowRegistry, type RedflowLogger, type Worker, type WorkflowClient } from '../../lib';
import { eventually, FAST_RUNTIME } from '../support/engine';
import { gatedChargeWorkflow } from '../support/gated-charge';
import { OwnRedis } from '../support/own-redis';

/** Collects what the engine logs, to count lines. */
function captureLogger(): RedflowLogger & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    log: (m) => lines.push(m),
    warn: (m) => lines.push(m),
    error: (m, stack) => lines.push(stack ? `${m}\n${stack}` : m),
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a Redis that refuses writes (maxmemory reached, noeviction)', () => {
  let server: OwnRedis;
  let client: WorkflowClient;
  let worker: Worker | undefined;
  let idleClient: WorkflowClient | undefined;
  let idleWorker: Worker | undefined;
  const logger = captureLogger();

  beforeAll(async () => {
    server = await OwnRedis.start(['--maxmemory-policy', 'noeviction']);
  });

  afterAll(async () => {
    server.cli('CONFIG', 'SET', 'maxmemory', '0');
    await worker?.stop({ timeoutMs: 1000 });
    await idleWorker?.stop({ timeoutMs: 1000 });
    await client?.close();
    await idleClient?.close();
    await server.stop();
  });

  it('stops claiming, keeps leases, runs each step body once, logs one line each way, and completes every run after memory is freed', async () => {
    const { registry, wf, executions, gate, gated } = gatedChargeWorkflow();
    client = createClient({ url: server.url, prefix: `full:${randomBytes(4).toString('hex')}`, registry, logger });
    worker = await startWorker({ app: 'full', client, registry, concurrency: 4, runtime: FAST_RUNTIME, logger });
    // A second worker with free slots and its own connection, which has seen no failure yet: its
    // promote and claim scripts must be refused before they change anything.
    idleClient = createClient({ url: server.url, prefix: client.keys.prefix, registry, logger });
    idleWorker = await startWorker({ app: 'full', client: idleClient, registry, concurrency: 4, runtime: FAST_RUNTIME, logger });

    const running = await Promise.all([1, 2, 3, 4].map((i) => client.start(wf, { i })));
    await eventually(() => gated() === 4);
    // Due while Redis is full: their promotion and claim must wait.
    const later = await Promise.all([5, 6].map((i) => client.start(wf, { i }, { runAt: Date.now() + 300 })));

    server.cli('CONFIG', 'SET', 'maxmemory', '1');
    gate.resolve();
    // A client call is refused with a named error, not a raw OOM reply.
    const refused = await client.start(wf, { i: 7 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RedisWriteRefusedError);
    expect((refused as Error).message).toContain('Redis refused a write in script "enqueue": OOM command not allowed');

    // Longer than two leases: heartbeats keep the leases, nothing is reaped or claimed.
    await sleep(2_500);
    const during = logger.lines.join('\n');
    // One line per client that saw it (the busy worker's and the idle worker's).
    expect(logger.lines.filter((l) => l.includes('refuses writes')).length).toBeLessThanOrEqual(2);
    expect(during).not.toMatch(/redis\.call|local function|KEYS\[1\]/);
    for (const h of later) {
      expect(executions.get(`${h.id}:a`)).toBeUndefined();
      expect((await client.getRun(h.id))?.status).toBe('scheduled');
    }
    for (const h of running) {
      expect((await client.getRun(h.id))?.status).toBe('running');
      expect(executions.get(`${h.id}:c`)).toBeUndefined();
    }

    server.cli('CONFIG', 'SET', 'maxmemory', '0');
    for (const h of [...running, ...later]) expect(await h.result({ timeoutMs: 10_000 })).toBe(6);
    for (const h of [...running, ...later]) {
      for (const stepName of ['a', 'b', 'c']) expect(executions.get(`${h.id}:${stepName}`)).toBe(1);
      const state = await client.getRun(h.id);
      expect(state?.attempt).toBe(1);
      expect(await client.redis.hget(client.keys.run(h.id), 'recoveries')).toBeNull();
    }
    // Logged once Redis has stayed up for a moment, so that a flapping Redis makes one episode.
    await eventually(
      () => logger.lines.filter((l) => l.includes('accepts writes again after')).length === logger.lines.filter((l) => l.includes('refuses writes')).length,
    );
    expect(logger.lines.join('\n')).not.toMatch(/RunStalledError|redis\.call/);
  });
});

describe('scripts on a Redis that refuses writes', () => {
  let server: OwnRedis;
  let client: WorkflowClient | undefined;
  let dir: string;

  beforeAll(async () => {
    // `dir` is a protected config: MISCONF below needs to change it at runtime.
    server = await OwnRedis.start(['--maxmemory-policy', 'noeviction', '--enable-protected-configs', 'yes', '--stop-writes-on-bgsave-error', 'yes']);
    dir = server.cli('CONFIG', 'GET', 'dir').split('\n')[1];
  });

  afterEach(async () => {
    server.cli('CONFIG', 'SET', 'maxmemory', '0');
    server.cli('CONFIG', 'SET', 'dir', dir);
    server.cli('CONFIG', 'SET', 'save', '');
    await client?.close();
    client = undefined;
  });

  afterAll(async () => {
    await server.stop();
  });

  /** Makes Redis refuse writes with MISCONF: a save point, and a BGSAVE into /proc, which takes no file even for root. */
  async function failSave(): Promise<void> {
    server.cli('CONFIG', 'SET', 'save', '3600 1');
    server.cli('CONFIG', 'SET', 'dir', '/proc');
    expect(server.cli('BGSAVE')).toBe('Background saving started');
    await eventually(() => server.cli('INFO', 'persistence').includes('rdb_bgsave_in_progress:0'));
    expect(server.cli('INFO', 'persistence')).toContain('rdb_last_bgsave_status:err');
  }

  /** Every key of the prefix with its serialized value. */
  async function snapshot(): Promise<Map<string, string>> {
    if (!client) throw new Error('no client');
    const keys = (await client.redis.keys(`${client.keys.base}*`)).sort();
    const out = new Map<string, string>();
    for (const key of keys) out.set(key, ((await client!.redis.dumpBuffer(key)) ?? Buffer.alloc(0)).toString('hex'));
    return out;
  }

  it.each([
    ['OOM (maxmemory reached)', 'OOM command not allowed', async () => void server.cli('CONFIG', 'SET', 'maxmemory', '1')],
    ['MISCONF (a failed BGSAVE)', 'MISCONF', failSave],
  ])('%s: every script is refused before it changes anything, with the write check or its own first write', async (_, reply, refuse) => {
    const registry = new WorkflowRegistry();
    const wf = registry.define('w', { event: [{ name: 'e' }] }, () => 1);
    client = createClient({ url: server.url, prefix: `atomic:${randomBytes(4).toString('hex')}`, registry, logger: captureLogger() });
    await client.syncRegistry(registry, { owner: 'atomic' });
    const queued = await client.start(wf, { n: 1 });
    await client.start(wf, { n: 2 }, { runAt: Date.now() - 1 });
    await client.start(wf, { n: 3 });
    await client.schedule('s', { workflow: 'w', every: '1h' });
    // A running run with a lease this test holds, for the scripts that check it.
    const claimed = await client.scripts.claim('default', 'lease-1', Date.now(), 60_000);
    expect(claimed?.runId).toBe(queued.id);
    const runId = queued.id;
    const step = (field: string) => ({ runId, token: 'lease-1', field, seq: 1, attempt: 1 });
    // A workflow the registry in Redis does not know yet, for sync-registry.
    registry.define('w2', {}, () => 2);
    const before = await snapshot();
    expect(before.size).toBeGreaterThan(3);

    await refuse();
    const scripts = client.scripts;
    const now = Date.now();
    const attempts: Array<[string, Promise<unknown>]> = [
      ['claim', scripts.claim('default', 'token-1', now, 1000)],
      ['promote', scripts.promote('default', now + 10_000, 10)],
      ['reap', scripts.reap(now + 10_000, 10, 10)],
      ['cancel', scripts.cancel(queued.id, now, '{}', 'test')],
      ['terminate', scripts.terminate(queued.id, now, '{}', 'test')],
      ['delete-run', scripts.deleteRun(queued.id, now, true, '{}', 'test')],
      ['resume', scripts.resume(queued.id, now)],
      [
        'emit-event',
        scripts.emitEvent({ eventId: 'ev1', event: 'e', payload: '{"a":1}', fields: 'a\t1', now, emitAt: 0, idempotencyKey: '', idempotencyTtlSec: 1 }),
      ],
      ['wait-event', scripts.waitEvent({ runId: queued.id, token: 't', field: 's:x', seq: 1, attempt: 1 }, 'e', 0, now, { shape: '', hash: 'h', json: '{}' })],
      ['register-cancel-on', scripts.registerCancelOn(queued.id, 't', [{ event: 'e', shape: '', hash: 'h' }])],
      ['fire-events', scripts.fireEvents(now + 10_000, 10)],
      ['schedule', scripts.schedule({ cronId: '@s2', def: '{"workflow":"w","every":1000,"input":null}', next: now + 1000, workflow: 'w', local: false })],
      ['unschedule', scripts.unschedule('@s')],
      [
        'enqueue',
        scripts.enqueue({
          runId: 'run-new',
          workflow: 'w',
          queue: 'default',
          maxAttempts: '3',
          input: '{}',
          now,
          runAt: now,
          idempotencyKey: 'idem',
          idempotencyTtlSec: 60,
          localFlow: true,
          extra: [],
        }),
      ],
      ['checkpoint', scripts.checkpoint(runId, 'lease-1', now, ['s:a', `[1,1,1,${now},0,1]`])],
      [
        'finish',
        scripts.finish({
          runId,
          queue: 'default',
          token: 'lease-1',
          now,
          outcome: 'succeeded',
          payload: '1',
          dueAt: 0,
          nextToken: 'lease-2',
          leaseMs: 1000,
          waitFields: [],
          records: ['s:a', `[1,1,1,${now},0,1]`],
        }),
      ],
      [
        'start-child',
        scripts.startChild({
          step: step('s:child'),
          now,
          mode: 'wait',
          childId: 'child-1',
          workflow: 'w',
          queue: 'default',
          maxAttempts: '3',
          input: '{}',
          runAt: now,
          idempotencyKey: '',
          idempotencyTtlSec: 0,
          deadline: 0,
          localFlow: true,
          extra: [],
        }),
      ],
      ['signal', scripts.signal(runId, 'sig', '"x"', now, 100)],
      ['wait-signal', scripts.waitSignal(step('s:wait'), 'sig', now + 60_000, now)],
      ['wait-any', scripts.waitAny(step('s:race'), now, { record: '[6,1,1,0]', branches: '[["a","s","sig"]]' })],
      ['sync-registry', client.syncRegistry(registry, { owner: 'atomic' })],
      ['presence', scripts.presence('worker-1', now, now + 60_000, [['w', 1]])],
      [
        'cron-fire',
        scripts.cronFire({
          cronId: '@s',
          tick: now,
          next: now + 3_600_000,
          workflow: 'w',
          input: 'null',
          now,
          overlap: 'allow',
          mode: 'tick',
          limit: undefined,
          priority: undefined,
        }),
      ],
      ['cron-pause', scripts.cronPause('@s', '{"at":0}', now)],
      ['rotate-payload', scripts.rotatePayload(client.keys.run(runId), 'hash', 'input', '{}', '"sealed"')],
      ['backfill-run-index', scripts.backfillRunIndex({ workflow: 'w', token: 'marker-1', leaseMs: 1000, cursor: '0', count: 10 })],
    ];
    for (const [name, attempt] of attempts) {
      const error = await attempt.catch((e: unknown) => e);
      expect(error).toBeInstanceOf(RedisWriteRefusedError);
      expect((error as RedisWriteRefusedError).script).toBe(name);
      expect((error as RedisWriteRefusedError).reply).toContain(reply);
    }
    expect(await snapshot()).toEqual(before);
    // The heartbeat writes no memory, so a full Redis lets it keep leases; MISCONF refuses every write.
    const heartbeat = await scripts.heartbeat(now + 60_000, [runId, 'lease-1']).catch((e: unknown) => e);
    if (reply === 'MISCONF') {
      expect(heartbeat).toBeInstanceOf(RedisWriteRefusedError);
      expect(await snapshot()).toEqual(before);
    } else expect(heartbeat).toEqual([]);
  });
});
