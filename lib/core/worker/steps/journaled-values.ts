import { randomUUID } from 'node:crypto';

import type { StepApiEntry } from '../step-host';

/** `step.now()`: the clock's time, journaled (`StepJournal.journaled`). */
export const now: StepApiEntry<'now'> = (rt) => () => rt.replay.journaled('now', () => rt.ctx.clock.now());

/** `step.random()`: `Math.random()`, journaled. */
export const random: StepApiEntry<'random'> = (rt) => () => rt.replay.journaled('random', () => Math.random());

/** `step.uuid()`: a random UUID, journaled. */
export const uuid: StepApiEntry<'uuid'> = (rt) => () => rt.replay.journaled('uuid', () => randomUUID());

/** `step.patched(id)`: the journaled answer (`StepJournal.patched`). */
export const patched: StepApiEntry<'patched'> = (rt) => (id) => rt.replay.patched(id);
