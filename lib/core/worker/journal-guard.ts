import { NonDeterminismError } from '../errors';
import { STEP_FIELD_PREFIX } from '../store/step-record';

/** What `found` names when the handler returned without reaching a step of its journal. */
export const END_OF_WORKFLOW = '(end of the workflow)';

/** Most turns of the event loop a check waits for replayed branches to catch up. */
const MAX_SETTLE_TURNS = 100;

/**
 * A step record's `seq` and whether it is a failure (its first two elements), read leniently: a
 * damaged record is reported by the step that reaches it (`decodeStepRecord`), so here it only
 * sorts last.
 */
function readRecord(text: string): { seq: number; failed: boolean } {
  try {
    const [ok, seq] = JSON.parse(text) as unknown[];
    return { seq: typeof seq === 'number' ? seq : Infinity, failed: ok === 0 };
  } catch {
    return { seq: Infinity, failed: false };
  }
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * The non-determinism guard of one attempt that replays a journal. The journal is the run's step
 * records in the order they were stored (`seq`). A replay may reach them in another order
 * (Promise.all branches resolve replayed steps at once, in code order), so order alone proves
 * nothing; what proves a disagreement is a recorded step the code no longer reaches:
 * - before a new step's function runs while recorded steps are still unreached, the guard lets
 *   the event loop turn until no branch reaches anything more (replayed steps resolve in
 *   microtasks, so every branch gets as far as its journal goes); a recorded step still
 *   unreached then means the new step took its place;
 * - when the handler returns, every recorded step must have been reached.
 * Either way the attempt fails with `NonDeterminismError` before any new step's function ran.
 * Steps stored after a step whose record is a failure are not checked: that step runs again.
 */
export class JournalGuard {
  /** Recorded step names not reached yet by this attempt. */
  private readonly unreached = new Set<string>();
  /** The first new step reached while recorded ones were unreached. */
  private found: string | undefined;
  private reachedCount = 0;
  private check: Promise<void> | undefined;

  private constructor(
    private readonly runId: string,
    /** Recorded step names in journal order. */
    private readonly journal: string[],
    /** How many of them, from the first, the code must reach. */
    enforced: number,
  ) {
    for (const name of journal.slice(0, enforced)) this.unreached.add(name);
  }

  /** The guard of an attempt over `stored` (the run hash the claim returned); undefined when the run has no steps yet. */
  static of(runId: string, stored: ReadonlyMap<string, string>): JournalGuard | undefined {
    const steps: Array<{ name: string; seq: number; failed: boolean }> = [];
    for (const [field, text] of stored) {
      if (field.startsWith(STEP_FIELD_PREFIX)) steps.push({ name: field.slice(STEP_FIELD_PREFIX.length), ...readRecord(text) });
    }
    if (!steps.length) return undefined;
    steps.sort((a, b) => a.seq - b.seq);
    // A step that failed runs again, and may take the handler another way this time (a
    // try/catch around it): only the steps stored before the first such one must be reached.
    const failedAt = steps.findIndex((s) => s.failed);
    return new JournalGuard(
      runId,
      steps.map((s) => s.name),
      failedAt < 0 ? steps.length : failedAt,
    );
  }

  /** A step name was reached (`begin()`); `recorded`: the journal has it. */
  reach(name: string, recorded: boolean): void {
    this.reachedCount++;
    if (recorded) this.unreached.delete(name);
    else if (this.unreached.size && this.found === undefined) this.found = name;
  }

  /** True when a new step must wait for `verify()` before its function runs. */
  get pending(): boolean {
    return this.found !== undefined;
  }

  /**
   * Resolves when the new step reached may run: every recorded step was reached once the
   * branches settled. Rejects with `NonDeterminismError` otherwise.
   */
  verify(): Promise<void> {
    this.check ??= this.settle();
    return this.check;
  }

  /** At the handler's return: throws `NonDeterminismError` if a recorded step was never reached. */
  assertComplete(): void {
    if (this.unreached.size) throw this.error(END_OF_WORKFLOW);
  }

  private async settle(): Promise<void> {
    // Until two turns in a row reach nothing more (or every recorded step is reached).
    let seen = this.reachedCount;
    let still = 0;
    for (let turn = 0; turn < MAX_SETTLE_TURNS && this.unreached.size && still < 2; turn++) {
      await nextTurn();
      still = seen === this.reachedCount ? still + 1 : 0;
      seen = this.reachedCount;
    }
    if (this.unreached.size) throw this.error(this.found ?? END_OF_WORKFLOW);
    this.found = undefined;
    this.check = undefined;
  }

  private error(found: string): NonDeterminismError {
    const position = this.journal.findIndex((name) => this.unreached.has(name));
    return new NonDeterminismError(this.runId, position + 1, this.journal[position], found);
  }
}
