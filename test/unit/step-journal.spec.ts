import { ConfigurationError, CorruptRunDataError, NonDeterminismError } from '../../lib/core/errors';
import type { AttemptContext } from '../../lib/core/worker/attempt-context';
import { CheckpointWriter } from '../../lib/core/worker/checkpoint-writer';
import { StepJournal } from '../../lib/core/worker/step-journal';
import { ReplayEndSignal } from '../../lib/core/worker/step-signals';

/**
 * The journal of one attempt, without Redis: how step calls are named, what a replay returns,
 * what is recorded for the next checkpoint (read back with `takePending()`, which also closes the
 * writer, so nothing is ever sent), and when a replay is not deterministic.
 */

/** A stored succeeded step record: [ok, seq, attempt, finishedAt, durationMs, output]. */
const succeeded = (seq: number, output: unknown) => JSON.stringify([1, seq, 1, 1_000, 4, output]);

function journalOf(stored: Record<string, string> = {}, replayOnly = false) {
  // The writer only reads its context when it flushes, which takePending() prevents.
  const writer = new CheckpointWriter({ runId: 'run-1' } as AttemptContext, replayOnly);
  const stopped = { value: false };
  const journal = new StepJournal('run-1', new Map(Object.entries(stored)), replayOnly, writer, {
    throwIfStopped: () => {
      if (stopped.value) throw new Error('stopped');
    },
  });
  return { journal, writer, stopped, pending: () => writer.takePending() };
}

describe('StepJournal', () => {
  it('names repeated calls of a step name in call order, and numbers new records after the stored ones', () => {
    const { journal, pending } = journalOf({ 's:pay': succeeded(1, 'a'), 's:pay#2': succeeded(2, 'b') });
    const names = [journal.begin('run', 'pay'), journal.begin('run', { name: 'pay' }), journal.begin('run', 'pay')].map((s) => s.name);
    expect(names).toEqual(['pay', 'pay#2', 'pay#3']);
    expect(journal.nextSeq()).toBe(3);
    expect(pending()).toEqual([]);
  });

  it('hands a stored record back to the step that reaches it, decoded', () => {
    const { journal } = journalOf({ 's:charge': succeeded(1, { id: 'ch_1' }) });
    const begun = journal.begin('run', 'charge');
    expect(begun.field).toBe('s:charge');
    expect(begun.record).toMatchObject({ kind: 'succeeded', seq: 1, output: { id: 'ch_1' } });
    expect(journal.begin('run', 'email').record).toBeUndefined();
  });

  it('rejects a step name that is empty or uses a reserved character, naming the step API', () => {
    const { journal } = journalOf();
    expect(() => journal.begin('run', '')).toThrow(ConfigurationError);
    expect(() => journal.begin('run', 'pay#2')).toThrow(/step name of step\.run/);
    expect(() => journal.begin('waitFor', 'a|b')).toThrow(ConfigurationError);
  });

  it('journals step.now(): made and recorded on the first call, replayed from the journal after', () => {
    const fresh = journalOf();
    expect(fresh.journal.journaled('now', () => 111)).toBe(111);
    expect(fresh.journal.journaled('now', () => 222)).toBe(222);
    expect(fresh.pending()).toEqual(['d:now', '111', 'd:now#2', '222']);

    const replay = journalOf({ 'd:now': '111', 'd:now#2': '222' });
    const make = jest.fn(() => 999);
    expect([replay.journal.journaled('now', make), replay.journal.journaled('now', make)]).toEqual([111, 222]);
    expect(make).not.toHaveBeenCalled();
    expect(replay.pending()).toEqual([]);
  });

  it('reports a journaled value of the wrong type as corrupt run data', () => {
    const { journal } = journalOf({ 'd:uuid': '42' });
    expect(() => journal.journaled('uuid', () => 'x')).toThrow(CorruptRunDataError);
    expect(() => journalOf({ 'd:random': '{oops' }).journal.journaled('random', () => 0.5)).toThrow(/field "d:random"/);
  });

  it('answers step.patched true for code that reaches the point first, false for a run that went past it, and keeps the answer', () => {
    const fresh = journalOf();
    expect(fresh.journal.patched('new-tax')).toBe(true);
    expect(fresh.pending()).toEqual(['p:new-tax', '1']);

    // A stored step this attempt has not reached yet: the run went past this point before the patch.
    const old = journalOf({ 's:charge': succeeded(1, null) });
    expect(old.journal.patched('new-tax')).toBe(false);
    expect(old.journal.patched('new-tax')).toBe(false);
    expect(old.pending()).toEqual(['p:new-tax', '0']);

    const stored = journalOf({ 'p:new-tax': '1', 's:charge': succeeded(1, null) });
    expect(stored.journal.patched('new-tax')).toBe(true);
    expect(() => journalOf({ 'p:new-tax': 'yes' }).journal.patched('new-tax')).toThrow(CorruptRunDataError);
  });

  it('a replay that only collects compensations ends at the first thing that is not in the journal, writing nothing', () => {
    const { journal, writer } = journalOf({ 's:charge': succeeded(1, 'ok'), 'd:now': '5' }, true);
    expect(journal.begin('run', 'charge').record?.kind).toBe('succeeded');
    expect(journal.journaled('now', () => 9)).toBe(5);
    expect(() => journal.journaled('now', () => 9)).toThrow(ReplayEndSignal);
    expect(() => journal.reachNew()).toThrow(ReplayEndSignal);
    expect(writer.written.size).toBe(0);
  });

  it('stops handing out values once the attempt stopped', () => {
    const { journal, stopped } = journalOf();
    stopped.value = true;
    expect(() => journal.journaled('uuid', () => 'x')).toThrow('stopped');
  });

  it('a new step where the journal holds another one fails the replay with NonDeterminismError', async () => {
    const { journal } = journalOf({ 's:charge': succeeded(1, 'ok') });
    journal.begin('run', 'refund');
    await expect(journal.reachNew()).rejects.toThrow(NonDeterminismError);
  });

  it('current() is the stored journal with what this attempt wrote over it', () => {
    const { journal, pending } = journalOf({ 's:charge': succeeded(1, 'ok') });
    journal.journaled('now', () => 7);
    expect(pending()).toEqual(['d:now', '7']);
    expect(Object.fromEntries(journal.current())).toEqual({ 's:charge': succeeded(1, 'ok'), 'd:now': '7' });
  });
});
