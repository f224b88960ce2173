import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

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

async function until(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(25);
  }
}

/**
 * Runs three workflows to their gated middle step, makes Redis refuse writes with `refuse`, lets
 * the steps end while writes are refused for longer than two leases, then accepts writes again
 * with `accept`. What must hold: a named error, one log line each way that names the fix, no
 * script source, nothing claimed while refused, every step body once, every run completes.
 */
async function refuseWritesMidRun(
  server: OwnRedis,
  refuse: () => Promise<void>,
  accept: () => Promise<void>,
  reply: 'READONLY' | 'MISCONF',
  fix: string,
): Promise<void> {
  const logger = captureLogger();
  const { registry, wf, executions, gate, gated } = gatedChargeWorkflow();
  let client: WorkflowClient | undefined;
  let worker: Worker | undefined;
  try {
    client = createClient({ url: server.url, prefix: `refused:${randomBytes(4).toString('hex')}`, registry, logger });
    worker = await startWorker({ app: 'refused', client, registry, concurrency: 4, runtime: FAST_RUNTIME, logger });

    const running = await Promise.all([1, 2, 3].map((i) => client!.start(wf, { i })));
    await eventually(() => gated() === 3);
    // Due while writes are refused: it must not be promoted or claimed.
    const later = await client.start(wf, { i: 4 }, { runAt: Date.now() + 300 });

    await refuse();
    gate.resolve();
    const refused = await client.start(wf, { i: 5 }).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(RedisWriteRefusedError);
    expect((refused as Error).message).toContain(`Redis refused a write in script "enqueue": ${reply}`);
    expect((refused as Error).message).not.toMatch(/redis\.call|local function|KEYS\[1\]/);

    // Longer than two leases (leaseMs 1000): the heartbeats are refused too.
    await sleep(2_500);
    const down = logger.lines.filter((l) => l.includes('refuses writes'));
    expect(down).toHaveLength(1);
    expect(down[0]).toContain(`(${reply} `);
    expect(down[0]).toContain(fix);
    expect(logger.lines.join('\n')).not.toMatch(/redis\.call|local function|KEYS\[1\]/);
    expect(executions.get(`${later.id}:a`)).toBeUndefined();
    expect((await client.getRun(later.id))?.status).toBe('scheduled');
    for (const h of running) {
      expect((await client.getRun(h.id))?.status).toBe('running');
      expect(executions.get(`${h.id}:c`)).toBeUndefined();
      // The refused heartbeats let the leases lapse: only the reaper's grace after recovery keeps them.
      expect(Number(await client.redis.zscore(client.keys.leases(), h.id))).toBeLessThan(Date.now());
    }

    await accept();
    for (const h of [...running, later]) expect(await h.result({ timeoutMs: 10_000 })).toBe(6);
    for (const h of [...running, later]) {
      for (const stepName of ['a', 'b', 'c']) expect(executions.get(`${h.id}:${stepName}`)).toBe(1);
      expect((await client.getRun(h.id))?.attempt).toBe(1);
      expect(await client.redis.hget(client.keys.run(h.id), 'recoveries')).toBeNull();
    }
    await eventually(() => logger.lines.some((l) => l.includes('accepts writes again after')));
    const up = logger.lines.filter((l) => l.includes('accepts writes again after'));
    expect(up).toHaveLength(1);
    expect(up[0]).toMatch(/accepts writes again after \d+\.\d s; workers resume\./);
    expect(logger.lines.join('\n')).not.toMatch(/RunStalledError|redis\.call/);
    expect(logger.lines.filter((l) => l.includes('refuses writes'))).toHaveLength(1);
  } finally {
    gate.resolve();
    await worker?.stop({ timeoutMs: 1000 });
    await client?.close();
  }
}

describe('a primary that becomes a read-only replica mid-run (READONLY)', () => {
  let primary: OwnRedis;
  let other: OwnRedis;

  beforeAll(async () => {
    primary = await OwnRedis.start(['--repl-diskless-sync-delay', '0']);
    other = await OwnRedis.start(['--repl-diskless-sync-delay', '0']);
    other.cli('REPLICAOF', '127.0.0.1', String(primary.port));
    await until(() => other.cli('INFO', 'replication').includes('master_link_status:up'), 'the replica to sync');
  });

  afterAll(async () => {
    await primary.stop();
    await other.stop();
  });

  /** FAILOVER from `from` to its replica `to`: `from` becomes a replica, with no write lost. */
  async function failover(from: OwnRedis, to: OwnRedis): Promise<void> {
    expect(from.cli('FAILOVER')).toBe('OK');
    await until(() => to.cli('ROLE').startsWith('master') && from.cli('ROLE').startsWith('slave'), 'the failover');
    await until(() => from.cli('INFO', 'replication').includes('master_link_status:up'), 'the new replica to sync');
  }

  it('a worker pointed at the replica refuses to start with RedisWriteRefusedError naming READONLY and the fix, and so do client calls; nothing is written', async () => {
    const logger = captureLogger();
    const registry = new WorkflowRegistry();
    registry.define('w', {}, () => 1);
    const prefix = `replica:${randomBytes(4).toString('hex')}`;
    const client = createClient({ url: other.url, prefix, registry, logger });
    try {
      const started = await startWorker({ app: 'replica', client, registry, logger }).catch((e: unknown) => e);
      expect(started).toBeInstanceOf(RedisWriteRefusedError);
      expect((started as Error).message).toContain('Redis refused a write in script "sync-registry": READONLY');
      expect((started as Error).message).toContain('connect to the primary instead of a replica (READONLY)');
      const byName = await client.runByName('w', {}).catch((e: unknown) => e);
      expect(byName).toBeInstanceOf(RedisWriteRefusedError);
      expect((byName as RedisWriteRefusedError).script).toBe('enqueue');
      for (const error of [started, byName]) expect((error as Error).message).not.toMatch(/redis\.call|local function|KEYS\[1\]/);
      expect(primary.cli('KEYS', `{${prefix}}*`)).toBe('');
    } finally {
      await client.close();
    }
  });

  it('refuses with a named error, logs one line each way, keeps every step to one run and completes every run once it is a primary again', async () => {
    await refuseWritesMidRun(
      primary,
      () => failover(primary, other),
      () => failover(other, primary),
      'READONLY',
      'connect to the primary (READONLY)',
    );
  });
});

describe('a Redis that cannot persist to disk (MISCONF, stop-writes-on-bgsave-error)', () => {
  let server: OwnRedis;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'redflow-misconf-'));
    // `dir` is a protected config: it can be changed at runtime only when this allows it.
    server = await OwnRedis.start(['--enable-protected-configs', 'yes', '--stop-writes-on-bgsave-error', 'yes', '--dir', dir]);
  });

  afterAll(async () => {
    server.cli('CONFIG', 'SET', 'stop-writes-on-bgsave-error', 'no');
    await server.stop();
  });

  /** Runs a BGSAVE (in progress as soon as it is answered) and waits until it is over; returns its status. */
  async function bgsave(): Promise<string> {
    expect(server.cli('BGSAVE')).toBe('Background saving started');
    let info = '';
    await until(() => (info = server.cli('INFO', 'persistence')).includes('rdb_bgsave_in_progress:0'), 'BGSAVE to end');
    return /rdb_last_bgsave_status:(\w+)/.exec(info)?.[1] ?? '';
  }

  it('refuses with a named error, logs one line each way, keeps every step to one run and completes every run once a save succeeds', async () => {
    await refuseWritesMidRun(
      server,
      async () => {
        // A save point makes Redis refuse writes after a failed save; /proc takes no file, even for root.
        server.cli('CONFIG', 'SET', 'save', '3600 1');
        server.cli('CONFIG', 'SET', 'dir', '/proc');
        expect(await bgsave()).toBe('err');
      },
      async () => {
        server.cli('CONFIG', 'SET', 'dir', dir);
        expect(await bgsave()).toBe('ok');
      },
      'MISCONF',
      'fix the disk Redis persists to (MISCONF)',
    );
  });
});
