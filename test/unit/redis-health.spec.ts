import { EventEmitter } from 'node:events';

import { RedisUnavailableError, RedisWriteRefusedError } from '../../lib/core/errors';
import type { RedisConnection } from '../../lib/core/store/connection';
import { RedisHealth } from '../../lib/core/store/redis-health';

/**
 * RedisHealth's timing rules, on jest's fake clock: one log line when an outage starts, at most
 * one every 30 s while it lasts, one when Redis has stayed back for 2 s (with the outage's
 * length); a probe write with backoff from 100 ms, doubling, capped at 5 s, which starts again
 * from 100 ms only once an outage is over. No Redis needed.
 */

const FULL = new RedisWriteRefusedError('claim', 'OOM command not allowed when used memory > maxmemory.');

/** A health whose probe fails with `failure` until `back()`. */
function setup(failure: Error = FULL) {
  const lines: { at: number; message: string }[] = [];
  const logger = { log: () => undefined, error: () => undefined, warn: (message: string) => void lines.push({ at: Date.now(), message }) };
  const probes: number[] = [];
  let redisIsBack = false;
  const probe = () => {
    probes.push(Date.now());
    return redisIsBack ? Promise.resolve('OK') : Promise.reject(failure);
  };
  const health = new RedisHealth('127.0.0.1:6379', logger, probe);
  return { health, lines, probes, back: (up = true) => (redisIsBack = up) };
}

const gaps = (times: number[]) => times.slice(1).map((t, i) => t - times[i]);

describe('RedisHealth', () => {
  beforeEach(() => jest.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => jest.useRealTimers());

  it('logs one line when writes start failing, then at most one every 30 s while they go on', async () => {
    const { health, lines } = setup();
    expect(health.report(FULL)).toBe(true);
    expect(health.report(FULL)).toBe(true);
    expect(lines.map((l) => l.message)).toEqual([
      'Redis at 127.0.0.1:6379 refuses writes (OOM command not allowed when used memory > maxmemory., in script "claim"). Workers stop claiming runs and retry every few seconds; free memory or raise maxmemory (OOM), connect to the primary (READONLY) or fix the disk Redis persists to (MISCONF).',
    ]);
    // Every failed probe (and any failed call) reports the outage again: 95 s of them.
    for (let i = 0; i < 95; i++) {
      health.report(FULL);
      await jest.advanceTimersByTimeAsync(1_000);
    }
    expect(lines).toHaveLength(4);
    for (const gap of gaps(lines.map((l) => l.at))) expect(gap).toBeGreaterThanOrEqual(30_000);
    expect(lines[1].message).toBe(
      'Redis at 127.0.0.1:6379 still refuses writes after 30.0 s (OOM command not allowed when used memory > maxmemory., in script "claim").',
    );
    expect(lines[3].message).toMatch(/^Redis at 127\.0\.0\.1:6379 still refuses writes after 90\.\d s/);
    health.close();
  });

  it('probes from 100 ms, doubling up to 5 s between probes, and resumes waiters when a probe succeeds', async () => {
    const { health, probes, back } = setup();
    const start = Date.now();
    health.report(FULL);
    let resumed = false;
    void health.whenHealthy().then(() => (resumed = true));
    await jest.advanceTimersByTimeAsync(40_000);
    expect(probes[0] - start).toBe(100);
    expect(gaps(probes).slice(0, 9)).toEqual([200, 400, 800, 1_600, 3_200, 5_000, 5_000, 5_000, 5_000]);
    expect(Math.max(...gaps(probes))).toBe(5_000);
    expect(resumed).toBe(false);
    expect(health.healthy).toBe(false);
    back();
    await jest.advanceTimersByTimeAsync(5_000);
    expect(resumed).toBe(true);
    expect(health.healthy).toBe(true);
    const count = probes.length;
    await jest.advanceTimersByTimeAsync(60_000);
    expect(probes).toHaveLength(count); // no probing while Redis is up
    health.close();
  });

  it('logs the recovery once Redis has stayed back 2 s, with the outage length; the next outage probes from 100 ms again', async () => {
    const { health, lines, probes, back } = setup();
    const start = Date.now();
    health.report(FULL);
    await jest.advanceTimersByTimeAsync(11_000); // probes at 100, 300, 700, 1500, 3100, 6300 ms, then 11300
    back();
    await jest.advanceTimersByTimeAsync(300); // the probe at 11.3 s succeeds
    expect(health.healthy).toBe(true);
    expect(lines).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1_999);
    expect(lines).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(1);
    expect(lines.map((l) => l.message)).toEqual([
      expect.stringContaining('refuses writes'),
      'Redis at 127.0.0.1:6379 accepts writes again after 11.3 s; workers resume.',
    ]);
    expect(lines[1].at - start).toBe(11_300 + 2_000);

    back(false);
    const second = Date.now();
    health.report(FULL);
    await jest.advanceTimersByTimeAsync(100);
    expect(probes[probes.length - 1] - second).toBe(100);
    health.close();
  });

  it('an outage that starts again within 2 s of the last one ending is the same outage: no new line, probes keep their backoff', async () => {
    const down = new RedisUnavailableError('127.0.0.1:6379', 'connect ECONNREFUSED');
    const { health, lines, probes, back } = setup(down);
    health.report(down);
    await jest.advanceTimersByTimeAsync(11_000);
    back();
    await jest.advanceTimersByTimeAsync(300); // the probe at 11.3 s succeeds
    expect(health.healthy).toBe(true);
    await jest.advanceTimersByTimeAsync(1_000);
    back(false);
    const again = Date.now();
    health.report(down);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(probes[probes.length - 1] - again).toBe(5_000);
    expect(lines.map((l) => l.message)).toEqual([expect.stringMatching(/^Redis at 127\.0\.0\.1:6379 is unreachable \(connect ECONNREFUSED\)/)]);
    health.close();
  });

  it('takes the errors of a watched connection: an outage is reported, anything else is logged once; "ready" ends an unreachable outage', async () => {
    const { health, lines } = setup();
    const connection = new EventEmitter();
    health.watch(connection as unknown as RedisConnection);
    expect(connection.listenerCount('error')).toBe(1);
    connection.emit('error', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }));
    connection.emit('error', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }));
    expect(health.state).toBe('unreachable');
    connection.emit('error', new Error('WRONGPASS invalid username-password pair'));
    connection.emit('error', new Error('WRONGPASS invalid username-password pair'));
    connection.emit('ready');
    expect(health.healthy).toBe(true);
    expect(lines.map((l) => l.message)).toEqual([
      expect.stringMatching(/^Redis at 127\.0\.0\.1:6379 is unreachable \(connect ECONNREFUSED 127\.0\.0\.1:6379\)/),
      'Redis connection error at 127.0.0.1:6379: WRONGPASS invalid username-password pair',
    ]);
    health.close();
  });
});
