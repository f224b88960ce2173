import { PROGRESS_FIELD } from '../../store/step-record';
import type { StepApiEntry } from '../step-host';

/** Largest progress value, in bytes of JSON. */
export const MAX_PROGRESS_BYTES = 64 * 1024;

/** `step.setProgress`: stored now, under the run's `progress` field. */
export const setProgress: StepApiEntry<'setProgress'> = (rt) => (value) =>
  rt.setField(PROGRESS_FIELD, value, 'The progress of the run', Math.min(MAX_PROGRESS_BYTES, rt.ctx.maxPayloadBytes));
