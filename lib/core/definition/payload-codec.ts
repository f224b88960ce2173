import { ConfigurationError } from '../errors';
import { describeValue } from './option-checks';

/**
 * What a stored payload is, told to the codec with each call: a run's `input` or `output`, a
 * step's recorded output (`step`), a signal's or an event's payload, a `setProgress` value
 * (`progress`), a `setEvent` value (`value`), an event wait's match values (`match`).
 */
export type PayloadKind = 'input' | 'output' | 'step' | 'signal' | 'event' | 'progress' | 'value' | 'match';

/** The context of one encode or decode: what the payload is and, where known, its run. */
export interface PayloadContext {
  kind: PayloadKind;
  /** The run the payload belongs to; absent for what is not a run's yet (an event's payload, a schedule's input). */
  runId?: string;
}

/**
 * Turns the bytes of every payload the engine stores (inputs, outputs, step records, signal and
 * event payloads, progress, `setEvent` values) into other bytes and back: encryption,
 * compression. Ids, names, statuses, times and errors stay readable, so indexes, the dashboard
 * and the CLI keep working. Both functions are synchronous: they run on the step journal's write
 * path. Keys held in a KMS are fetched before the client starts (envelope encryption), as
 * `aesGcmCodec` takes them.
 *
 * `decode(encode(b))` must return `b`. A codec that cannot decode throws a named error (the
 * built-in one: `PayloadKeyError`, naming the key), never returns other bytes.
 */
export interface PayloadCodec {
  encode(bytes: Uint8Array, context: PayloadContext): Uint8Array;
  decode(bytes: Uint8Array, context: PayloadContext): Uint8Array;
  /**
   * Whether encoded bytes should be encoded again by `rotatePayloads` (the built-in codec: they
   * were encrypted with a key that is not the current one). @default every payload is re-encoded
   */
  needsRotation?(bytes: Uint8Array): boolean;
  /** A short description of encoded bytes without decoding them, such as `aes-256-gcm, key "k1"`: what the dashboard and CLI show without the codec. */
  describe?(bytes: Uint8Array): string;
}

/** Checks the `codec` option: undefined, or an object with `encode` and `decode` functions. */
export function checkCodecOption(codec: unknown, where: string): PayloadCodec | undefined {
  if (codec === undefined) return undefined;
  const c = codec as Partial<PayloadCodec> | null;
  if (typeof c !== 'object' || c === null || typeof c.encode !== 'function' || typeof c.decode !== 'function') {
    throw new ConfigurationError(
      `${where} codec must be a payload codec, an object with encode(bytes, context) and decode(bytes, context) functions such as aesGcmCodec({ keys, current }), got ${describeValue(codec)}.`,
    );
  }
  return c as PayloadCodec;
}
