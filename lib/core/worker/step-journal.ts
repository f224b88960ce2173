import { assertKnownKeys, checkUserName, renamedDuration, STEP_OPTION_KEYS } from '../definition/option-checks';
import type { StepOptions } from '../definition/step-types';
import { ConfigurationError, CorruptRunDataError } from '../errors';
import type { Payloads } from '../store/payloads';
import { decodeStepRecord, DETERMINISTIC_FIELD_PREFIX, PATCH_FIELD_PREFIX, STEP_FIELD_PREFIX, type StoredStep } from '../store/step-record';
import type { CheckpointWriter } from './checkpoint-writer';
import { JournalGuard } from './journal-guard';
import { ReplayEndSignal } from './step-signals';

/** An explicit step name: "#" is reserved for repeat suffixes, "|" and newlines separate step fields in scripts. */
export const STEP_NAME_RULES = { forbid: '#|', reason: '"#" is reserved for the "#2", "#3" suffix of repeated names and "|" separates fields in scripts' };

/** What `begin` gives a step call: its options, unique name, run-hash field and stored record, if any. */
export interface BegunStep<O> {
  opts: O;
  name: string;
  field: string;
  record?: StoredStep;
  /** The step's `timeout` (or its deprecated `timeoutMs`) in ms, if it has one. */
  timeoutMs: number | undefined;
}

/** What the journal asks of its attempt before it hands out a value: may steps still be taken? */
export interface StepGate {
  /** Throws when the attempt stopped, waits or ended. */
  throwIfStopped(): void;
}

/**
 * The journal of one attempt: the run hash loaded by the claim (no round trip), read as the
 * handler reaches its steps. It names each step call, replays stored records, hands out the
 * journaled values of `step.now()` / `step.random()` / `step.uuid()` and the answers of
 * `step.patched`, numbers new records (`seq`), and tells the non-determinism guard
 * (`journal-guard.ts`) what the replay reached.
 */
export class StepJournal {
  /** The non-determinism guard of a replay (none for a run without steps, or a compensation replay). */
  readonly guard: JournalGuard | undefined;
  private readonly calls = new Map<string, number>();
  /** The step fields this attempt has reached so far (replayed or new), for `step.patched`. */
  private readonly reached = new Set<string>();
  /** The answers of `step.patched` in this attempt, by field. */
  private readonly patches = new Map<string, boolean>();
  private seq: number;

  /**
   * `replayOnly`: a replay that only collects the compensations of completed steps (a compensating
   * run): stored results come back as usual, and the first step that did not complete ends the
   * replay (`ReplayEndSignal`) without running anything or writing anything.
   */
  constructor(
    private readonly runId: string,
    readonly stored: Map<string, string>,
    readonly replayOnly: boolean,
    private readonly writer: CheckpointWriter,
    private readonly gate: StepGate,
    /** How payloads are stored: stored step outputs are opened through it. */
    private readonly payloads?: Payloads,
  ) {
    let steps = 0;
    for (const field of stored.keys()) if (field.startsWith(STEP_FIELD_PREFIX)) steps++;
    this.seq = steps;
    this.guard = replayOnly ? undefined : JournalGuard.of(runId, stored);
  }

  /**
   * Gives a step call its unique name (synchronously, in call order, so replays of loops and
   * Promise.all match) and its stored record, if any.
   */
  begin<O extends StepOptions>(api: string, options: O | string, known: readonly string[] = STEP_OPTION_KEYS): BegunStep<O> {
    const opts = (typeof options === 'string' ? { name: options } : options) as O;
    assertKnownKeys(`step.${api} options`, opts, known);
    const timeoutMs = renamedDuration(opts, { name: 'timeout', deprecated: 'timeoutMs', label: (key) => `${key} of step.${api}`, timer: true });
    if (!opts || typeof opts.name !== 'string' || opts.name === '') {
      throw new ConfigurationError(`step.${api} needs a non-empty name: step.${api}({ name: "charge" }, ...) or step.${api}("charge", ...).`);
    }
    checkUserName(opts.name, `The step name of step.${api}`, STEP_NAME_RULES);
    const count = (this.calls.get(opts.name) ?? 0) + 1;
    this.calls.set(opts.name, count);
    const name = count === 1 ? opts.name : `${opts.name}#${count}`;
    const field = STEP_FIELD_PREFIX + name;
    this.reached.add(field);
    const stored = this.stored.get(field);
    const record = stored === undefined ? undefined : decodeStepRecord(this.runId, field, stored, this.payloads);
    this.guard?.reach(name, record !== undefined);
    return { opts, name, field, record, timeoutMs };
  }

  /** The `seq` of the next record this attempt stores: records are numbered in the order they complete. */
  nextSeq(): number {
    return ++this.seq;
  }

  /**
   * `step.now()`, `step.random()`, `step.uuid()`: the value made on the first call at this place in
   * the run (the n-th call of a kind is `d:<kind>#n`), stored with the next checkpoint, which every
   * later step waits for before its function runs; a replay returns the stored value. So a step
   * that uses the value (an idempotency key, say) sees the same one in every try.
   */
  journaled<T extends number | string>(kind: 'now' | 'random' | 'uuid', make: () => T): T {
    this.gate.throwIfStopped();
    const count = (this.calls.get(DETERMINISTIC_FIELD_PREFIX + kind) ?? 0) + 1;
    this.calls.set(DETERMINISTIC_FIELD_PREFIX + kind, count);
    const field = `${DETERMINISTIC_FIELD_PREFIX}${kind}${count === 1 ? '' : `#${count}`}`;
    const stored = this.stored.get(field);
    if (stored !== undefined) {
      let value: unknown;
      try {
        value = JSON.parse(stored);
      } catch {
        value = undefined;
      }
      const type = kind === 'uuid' ? 'string' : 'number';
      if (typeof value !== type) throw new CorruptRunDataError(this.runId, `field "${field}" (the value of step.${kind}()) is not a ${type}`);
      return value as T;
    }
    this.endReplay();
    const value = make();
    this.writer.record(field, JSON.stringify(value));
    return value;
  }

  /**
   * `step.patched(id)`: true for a run that reaches this point running the patched code, false for
   * one whose journal shows it went past this point before the patch existed (stored steps this
   * attempt has not reached yet). The answer is stored (`p:<id>`), so the run keeps it for good.
   */
  patched(id: string): boolean {
    checkUserName(id, 'The id of step.patched', STEP_NAME_RULES);
    this.gate.throwIfStopped();
    const field = PATCH_FIELD_PREFIX + id;
    const known = this.patches.get(field);
    if (known !== undefined) return known;
    const stored = this.stored.get(field);
    let answer: boolean;
    if (stored === '1' || stored === '0') {
      answer = stored === '1';
    } else if (stored !== undefined) {
      throw new CorruptRunDataError(this.runId, `field "${field}" (the answer of step.patched("${id}")) is not "1" or "0"`);
    } else {
      this.endReplay();
      answer = true;
      for (const key of this.stored.keys()) {
        if (key.startsWith(STEP_FIELD_PREFIX) && !this.reached.has(key)) {
          answer = false;
          break;
        }
      }
      this.writer.record(field, answer ? '1' : '0');
    }
    this.patches.set(field, answer);
    return answer;
  }

  /** In a replay that only collects compensations, reaching anything new ends the replay. */
  endReplay(): void {
    if (this.replayOnly) throw new ReplayEndSignal(`The replay of run "${this.runId}" reached a step that did not complete.`);
  }

  /**
   * Before a new step does anything: ends a compensation replay, and while recorded steps are still
   * unreached, returns the guard's check. A new step where the journal has another one: nothing of
   * it runs (NonDeterminismError).
   */
  reachNew(): Promise<void> | undefined {
    this.endReplay();
    return this.guard?.pending ? this.guard.verify() : undefined;
  }

  /** The run's journal as this attempt leaves it: the stored fields with every field it wrote over them. */
  current(): Map<string, string> {
    const all = new Map(this.stored);
    for (const [field, value] of this.writer.written) all.set(field, value);
    return all;
  }
}
