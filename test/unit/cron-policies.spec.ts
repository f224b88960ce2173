import { checkSchedulePolicies, lastTicks, MISSED_AFTER_MS, nextTicks, planTick, type StoredCron } from '../../lib/core/definition/cron';

const HOUR = 3_600_000;
const T = Date.UTC(2026, 5, 1); // a tick of an hourly schedule
const hourly = (policies: Partial<StoredCron> = {}): StoredCron => ({ workflow: 'report', every: HOUR, input: null, ...policies });

/** The `missed` policy, decided in the ticker before the tick's script runs: a pure function of the schedule, the tick and now. */
describe('planTick', () => {
  it('fires a tick on time, and moves to the tick after now', () => {
    expect(planTick(hourly(), T, T + 500)).toEqual({ fire: true, next: T + HOUR });
    // Up to a minute late is on time, whatever the policy.
    expect(planTick(hourly({ missed: 'skip' }), T, T + MISSED_AFTER_MS)).toEqual({ fire: true, next: T + HOUR });
  });

  it("'once' (the default) fires a missed tick once and goes on after now", () => {
    expect(planTick(hourly(), T, T + 5 * HOUR + 600_000)).toEqual({ fire: true, next: T + 6 * HOUR });
  });

  it("'skip' drops missed ticks: it moves to the first tick less than a minute old, or the next one", () => {
    expect(planTick(hourly({ missed: 'skip' }), T, T + 5 * HOUR + 600_000)).toEqual({ fire: false, next: T + 6 * HOUR });
    // The latest tick is 30 s old: on time, so the schedule moves to it, and it fires on the next pass.
    expect(planTick(hourly({ missed: 'skip' }), T, T + 5 * HOUR + 30_000)).toEqual({ fire: false, next: T + 5 * HOUR });
  });

  it("'all' fires each missed tick in turn, skipping to the latest missedLimit of them first", () => {
    const now = T + 5 * HOUR + 600_000;
    expect(planTick(hourly({ missed: 'all', missedLimit: 3 }), T, now)).toEqual({ fire: false, next: T + 3 * HOUR });
    expect(planTick(hourly({ missed: 'all', missedLimit: 3 }), T + 3 * HOUR, now)).toEqual({ fire: true, next: T + 4 * HOUR });
    expect(planTick(hourly({ missed: 'all' }), T, now)).toEqual({ fire: true, next: T + HOUR });
  });

  it('lists ticks before and after a time, for cron expressions in a time zone too', () => {
    expect(nextTicks('report', { every: HOUR }, T, 2)).toEqual([T + HOUR, T + 2 * HOUR]);
    expect(lastTicks('report', { every: HOUR }, T + 10, 2)).toEqual([T, T - HOUR]);
    expect(nextTicks('report', { expression: '0 9 * * *', timezone: 'Europe/Paris' }, T, 1)).toEqual([Date.UTC(2026, 5, 1, 7)]);
    expect(lastTicks('report', { expression: '0 9 * * *', timezone: 'Europe/Paris' }, Date.UTC(2026, 5, 1, 7), 1)).toEqual([Date.UTC(2026, 5, 1, 7)]);
  });

  it('checks the policies, keeping only those given', () => {
    expect(checkSchedulePolicies({}, 'schedule "s"')).toEqual({});
    expect(checkSchedulePolicies({ missed: 'all', missedLimit: 5, overlap: 'allow' }, 'schedule "s"')).toEqual({
      missed: 'all',
      missedLimit: 5,
      overlap: 'allow',
    });
    expect(() => checkSchedulePolicies({ missed: 'all', missedLimit: 0 }, 'schedule "s"')).toThrow(
      'missedLimit of schedule "s" must be an integer from 1 to 10000',
    );
  });
});
