import { ConfigurationError, CorruptRunDataError } from '../../lib';
import { childBranch, eventBranch, raceBranch, raceBranches } from '../../lib/core/definition/race';
import { decodeStepRecord, encodeRaceRecord, isJournalField, parseStepRecord } from '../../lib/core/store/step-record';

describe('step.waitForAny branches and race records', () => {
  it('branch descriptors are frozen values, read back in declaration order', () => {
    const signal = raceBranch({ kind: 'signal', signal: 'approved' });
    const timer = raceBranch({ kind: 'timer', target: '3d' });
    const child = raceBranch(childBranch('child-wf', { n: 1 }, { onLose: 'abandon' }));
    expect(Object.isFrozen(signal)).toBe(true);
    expect(raceBranches({ approved: signal, timeout: timer, child }, 'step.waitForAny "x"')).toEqual([
      ['approved', { kind: 'signal', signal: 'approved' }],
      ['timeout', { kind: 'timer', target: '3d' }],
      ['child', { kind: 'child', workflow: 'child-wf', input: { n: 1 }, onLose: 'abandon' }],
    ]);
    expect(childBranch('w', 1, undefined)).toMatchObject({ onLose: 'cancel' });
    expect(raceBranches({ paid: raceBranch(eventBranch('paid', { match: { order: 'o-1' } })) }, 'x')).toEqual([
      ['paid', { kind: 'event', event: 'paid', match: { order: 'o-1' } }],
    ]);
  });

  it('refuses no branches, a value that is not a branch, and unknown step.child options', () => {
    expect(() => raceBranches({}, 'step.waitForAny "x"')).toThrow(
      new ConfigurationError(
        `step.waitForAny "x" has no branches: give at least one, e.g. step.waitForAny("name", { approved: step.signal('approved'), timeout: step.timer('3d') }).`,
      ),
    );
    expect(() => raceBranches([], 'step.waitForAny "x"')).toThrow(ConfigurationError);
    expect(() => raceBranches({ a: { kind: 'timer', target: 1 } }, 'step.waitForAny "x"')).toThrow('Branch "a" of step.waitForAny "x" is');
    expect(() => childBranch('w', 1, { onLos: 'abandon' } as never)).toThrow(ConfigurationError);
    expect(() => eventBranch('paid', { matches: {} } as never)).toThrow(ConfigurationError);
  });

  it('a race record decodes as a waiting step; its branches field is part of the journal', () => {
    const race = encodeRaceRecord(
      3,
      1,
      5_000,
      [
        ['approved', 's', 'approved'],
        ['timeout', 't', 5_000],
        ['child', 'c', 'r.x.child', 'cancel'],
      ],
      1_000,
    );
    expect(race).toEqual({ record: '[6,3,1,5000,1000]', branches: '[["approved","s","approved"],["timeout","t",5000],["child","c","r.x.child","cancel"]]' });
    expect(decodeStepRecord('r', 's:x', race.record)).toEqual({ seq: 3, attempt: 1, kind: 'race', deadline: 5_000, began: 1_000 });
    expect(parseStepRecord('r', 's:x', race.record)).toEqual({ name: 'x', seq: 3, attempt: 1, status: 'waiting', wakeAt: 5_000, startedAt: 1_000 });
    expect(parseStepRecord('r', 's:x', '[6,3,1,0]')).toEqual({ name: 'x', seq: 3, attempt: 1, status: 'waiting' });
    expect(() => decodeStepRecord('r', 's:x', '[6,3,1,"soon"]')).toThrow(CorruptRunDataError);
    expect(isJournalField('r:x')).toBe(true);
  });
});
