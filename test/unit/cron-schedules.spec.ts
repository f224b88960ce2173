import { ConfigurationError, WorkflowRegistry } from '../../lib/core';
import { checkCronId, cronIds, decodeCron, encodeCron, nextCronTick, runtimeCronId, scheduleIdOf, scheduleOf } from '../../lib/core/definition/cron';

describe('interval schedules', () => {
  it('tick on the multiples of the interval since the epoch: the next after now, or the last tick + the interval', () => {
    const every = { every: 5_000 };
    expect(nextCronTick('w', every, 1_000_000)).toBe(1_005_000);
    expect(nextCronTick('w', every, 1_000_001)).toBe(1_005_000);
    expect(nextCronTick('w', every, 1_004_999)).toBe(1_005_000);
    // A tick that fired on time: the next is that tick + the interval.
    expect(nextCronTick('w', every, 1_005_000)).toBe(1_010_000);
    // Back after a pause of 3 intervals: the next multiple after now, no catching up.
    expect(nextCronTick('w', every, 1_020_300)).toBe(1_025_000);
    expect(nextCronTick('w', { every: 1_000 }, Date.UTC(2026, 0, 1, 0, 0, 0, 400))).toBe(Date.UTC(2026, 0, 1, 0, 0, 1));
    expect(nextCronTick('w', { every: 86_400_000 }, Date.UTC(2026, 0, 1, 13))).toBe(Date.UTC(2026, 0, 2));
  });

  it('are stored as { workflow, every, input } and read back into the same schedule', () => {
    const stored = encodeCron('report', { every: 30_000, input: { scope: 'all' } });
    expect(JSON.parse(stored)).toEqual({ workflow: 'report', every: 30_000, input: { scope: 'all' } });
    expect(scheduleOf(decodeCron(stored))).toEqual({ every: 30_000 });
    // A cron trigger keeps the shape it always had.
    const cron = encodeCron('report', { expression: '0 3 * * *', timezone: 'UTC' });
    expect(JSON.parse(cron)).toEqual({ workflow: 'report', expression: '0 3 * * *', timezone: 'UTC', input: null });
    expect(scheduleOf(decodeCron(cron))).toEqual({ expression: '0 3 * * *', timezone: 'UTC' });
    expect(scheduleOf(decodeCron(encodeCron('report', { expression: '0 3 * * *' })))).toEqual({ expression: '0 3 * * *', timezone: undefined });
  });
});

describe('cron ids of runtime schedules and of workflow definitions', () => {
  it('never meet: runtime ids start with "@", which a trigger id may not', () => {
    expect(runtimeCronId('nightly')).toBe('@nightly');
    expect(scheduleIdOf('@nightly')).toBe('nightly');
    expect(scheduleIdOf('@@x')).toBe('@x');
    expect(scheduleIdOf('nightly')).toBeUndefined();
    expect(scheduleIdOf('report#0')).toBeUndefined();

    const registry = new WorkflowRegistry();
    // Default ids start with the workflow name, which starts with a letter or digit.
    expect(cronIds(registry.define('report', { cron: [{ expression: '0 3 * * *' }, { id: 'me@home', expression: '0 4 * * *' }] }, () => 1))).toEqual([
      'report#0',
      'me@home',
    ]);
    expect(() => registry.define('bad', { cron: [{ id: '@nightly', expression: '0 3 * * *' }] }, () => 1)).toThrow(
      new ConfigurationError('cron[0].id of workflow "bad" must not start with "@", got "@nightly": that mark is kept for the schedules of client.schedule().'),
    );
    expect(registry.get('bad')).toBeUndefined();
    expect(checkCronId('nightly', 'id')).toBe('nightly');
    expect(() => checkCronId('', 'id')).toThrow(ConfigurationError);
  });
});
