/** A value given to or returned by a workflow that cannot be accepted or stored: an invalid input, a value JSON cannot hold, one too large. */
import { RedflowError } from './redflow-error';

/** One problem reported by an input validator. */
export interface ValidationIssue {
  message: string;
  path?: ReadonlyArray<PropertyKey>;
}

/** The workflow input was rejected by the workflow's schema or DTO class. Nothing was stored. */
export class InputValidationError extends RedflowError {
  constructor(
    readonly workflow: string,
    readonly issues: ReadonlyArray<ValidationIssue>,
    /** What was invalid, when it is not the workflow's input (a signal's payload, say). */
    subject?: string,
  ) {
    const detail = issues
      .slice(0, 5)
      .map((i) => (i.path && i.path.length ? `${i.path.map(String).join('.')}: ${i.message}` : i.message))
      .join('; ');
    super(
      subject
        ? `${subject} is invalid: ${detail}. Fix it to match its schema.`
        : `Input for workflow "${workflow}" is invalid: ${detail}. Fix the input to match the workflow's schema.`,
    );
  }
}

/**
 * A value (a step or workflow output, an input, an event payload) holds something JSON would drop
 * or change, so it cannot be stored. `path` says where, e.g. `$.items[2]`; `$` is the value itself.
 */
export class OutputSerializationError extends RedflowError {
  constructor(
    /** The value, e.g. `The output of step "charge"`. */
    readonly what: string,
    /** Where in the value the problem is: `$` for the value itself, `$.a.b[2]` inside it. */
    readonly path: string,
    /** What is there and what JSON would do with it, e.g. `NaN (JSON would store null)`. */
    readonly reason: string,
  ) {
    super(
      `${what} cannot be stored as JSON: ${path} is ${reason}. Use plain JSON data: objects, arrays, strings, numbers, booleans, null or Dates (stored as ISO strings).`,
    );
  }
}

/** An input or a step output is larger than `maxPayloadBytes`. */
export class PayloadTooLargeError extends RedflowError {
  constructor(
    readonly what: string,
    readonly bytes: number,
    readonly limit: number,
    fix = 'Store large data elsewhere and pass a reference, or raise maxPayloadBytes.',
  ) {
    super(`${what} is ${bytes} bytes, over the ${limit}-byte limit. ${fix}`);
  }
}

/**
 * A stored payload could not be encoded or decoded by the payload codec: the codec threw, a
 * payload stored encoded was read by a client that has no `codec`, or the stored bytes are
 * damaged. Names the run (when known), what the payload is and the fix. Never a garbled value.
 */
export class PayloadCodecError extends RedflowError {
  constructor(
    /** What the payload is, e.g. `The input of run "abc"`. */
    readonly what: string,
    /** Why, with the fix. */
    readonly reason: string,
  ) {
    super(`${what} could not be read or written by the payload codec: ${reason}`);
  }
}

/**
 * A payload was encrypted with a key the codec does not have (`reason: 'unknown'`), or with a
 * key of that id whose bytes differ from the codec's (`'mismatch'`: the authentication tag does
 * not verify). Names the key id, so the fix is to add that key to the codec's `keys`.
 */
export class PayloadKeyError extends RedflowError {
  constructor(
    /** The key id the payload names. */
    readonly keyId: string,
    readonly reason: 'unknown' | 'mismatch',
    /** The key ids the codec has. */
    readonly knownKeys: ReadonlyArray<string>,
  ) {
    super(
      reason === 'unknown'
        ? `A stored payload was encrypted with key "${keyId}", which this codec does not have (it has ${knownKeys.map((k) => `"${k}"`).join(', ')}). Add key "${keyId}" to the codec's keys: old keys stay until \`redflow payloads rotate\` has re-encrypted every payload with the current key.`
        : `A stored payload names key "${keyId}", but it does not decrypt with this codec's key "${keyId}" (the authentication tag does not verify): the key's bytes differ from the ones it was encrypted with, or the payload was altered. Give key "${keyId}" its original bytes.`,
    );
  }
}
