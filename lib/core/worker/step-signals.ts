/** Thrown through the handler when the run must wait (a timer or a child): not an error. */
export class SuspendSignal extends Error {
  override name = 'SuspendSignal';
}

/**
 * Thrown through the handler of a replay that only collects compensations (a compensating run):
 * the replay reached a step that did not complete, and goes no further.
 */
export class ReplayEndSignal extends SuspendSignal {
  override name = 'ReplayEndSignal';
}

/** Rejects a sibling step after another branch of the same attempt failed. */
export class SiblingStepFailedError extends Error {
  override name = 'SiblingStepFailedError';
}
