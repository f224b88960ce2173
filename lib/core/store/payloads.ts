import { createHash } from 'node:crypto';

import { describeAesGcmPayload } from '../definition/aes-gcm-codec';
import type { PayloadCodec, PayloadContext } from '../definition/payload-codec';
import { PayloadCodecError, PayloadKeyError } from '../errors';
import { decodeJson, ENVELOPE_MARK, PLAIN_MARK } from './serialization';

/**
 * Payloads as they are stored: the one place the `codec` option is applied. A payload's JSON text
 * (`encodeJson`) is sealed before it is written and opened after it is read.
 *
 * A sealed payload is itself a JSON string, `"\u0001rfc:<base64url of the codec's bytes>"`, so
 * the Lua scripts that move payloads around (a child's output into its parent's step record, a
 * signal's payload into the waiting step's record, an event's payload into each waiting run) keep
 * moving JSON text without knowing. Opening looks at top-level strings only: a value that does
 * not start with the mark costs one character comparison. A user's string that happens to start
 * with the mark is stored escaped (`"\u0001rfp:<its JSON text>"`, serialization.ts), so it reads
 * back unchanged with or without a codec.
 */

/** The start of an envelope a codec wrote. */
const CODEC_MARK = `${ENVELOPE_MARK}c:`;
/** The same in JSON text, as it appears in a stored record. */
const CODEC_MARK_JSON = '\\u0001rfc:';
/** Every codec envelope inside stored JSON text. */
const SEALED_IN_TEXT = /"\\u0001rfc:([A-Za-z0-9_-]*)"/g;

/** What the dashboard and the CLI show for a payload they have no codec (or key) for. */
export interface EncryptedPayload {
  /** What the payload is encoded with, such as `aes-256-gcm, key "k1"`. */
  encrypted: string;
  /** Why it could not be decoded here, when a codec was given but failed. */
  error?: string;
}

/** The bytes as a Buffer, without a copy. */
function asBuffer(bytes: Uint8Array): Buffer {
  return Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

function describeContext(context: PayloadContext): string {
  const of = context.runId ? ` of run "${context.runId}"` : '';
  const what: Record<PayloadContext['kind'], string> = {
    input: 'The input',
    output: 'The output',
    step: 'A step output',
    signal: 'A signal payload',
    event: 'An event payload',
    progress: 'The progress',
    value: 'A setEvent value',
    match: 'The match of an event wait',
  };
  return what[context.kind] + of;
}

export class Payloads {
  /**
   * @param codec the `codec` option; undefined stores payloads as plain JSON.
   * @param display open what cannot be decoded as an `EncryptedPayload` instead of throwing: the
   *   dashboard and the CLI, which show runs rather than compute with them.
   */
  constructor(
    readonly codec: PayloadCodec | undefined,
    private readonly display = false,
  ) {}

  /** A copy that opens undecodable payloads as `EncryptedPayload` (the dashboard's and the CLI's). */
  forDisplay(): Payloads {
    return new Payloads(this.codec, true);
  }

  /** The stored form of a payload's JSON text ('' for undefined stays ''). */
  seal(json: string, context: PayloadContext): string {
    if (!this.codec || json === '') return json;
    let bytes: Uint8Array;
    try {
      bytes = this.codec.encode(Buffer.from(json, 'utf8'), context);
    } catch (error) {
      throw new PayloadCodecError(describeContext(context), `its encode threw: ${error instanceof Error ? error.message : String(error)}. Fix the codec.`);
    }
    return `"${CODEC_MARK_JSON}${asBuffer(bytes).toString('base64url')}"`;
  }

  /** A stored value, parsed: the payload it holds when it is an envelope, else itself. */
  open(value: unknown, context: PayloadContext): unknown {
    if (typeof value !== 'string' || value.charCodeAt(0) !== 1 || !value.startsWith(ENVELOPE_MARK)) return value;
    if (value.startsWith(PLAIN_MARK)) return JSON.parse(value.slice(PLAIN_MARK.length));
    if (!value.startsWith(CODEC_MARK)) return value;
    const bytes = Buffer.from(value.slice(CODEC_MARK.length), 'base64url');
    try {
      if (!this.codec) {
        throw new PayloadCodecError(
          describeContext(context),
          `it is stored encoded by a payload codec (${describePayloadBytes(bytes)}) and this client has none. Give it the same codec option as the processes that write runs, with their keys.`,
        );
      }
      return this.decodeBytes(bytes, context);
    } catch (error) {
      if (!this.display) throw error;
      return { encrypted: describePayloadBytes(bytes, this.codec), ...(this.codec ? { error: (error as Error).message } : {}) } satisfies EncryptedPayload;
    }
  }

  /** A stored JSON text (a run-hash field), parsed and opened; '' and undefined are undefined. */
  openText(text: string | null | undefined, field: string, context: PayloadContext): unknown {
    if (text == null || text === '') return undefined;
    return this.open(decodeJson(text, context.runId ?? '?', field), context);
  }

  /**
   * A run's input. A batch's input (`batched`: the run's `batch` field, set by batch.lua) is the
   * array of its events' payloads, each sealed apart by its emit: opened item by item.
   */
  openInput(text: string | null | undefined, context: PayloadContext, batched: boolean): unknown {
    const input = this.openText(text, 'input', context);
    return batched && Array.isArray(input) ? input.map((item) => this.open(item, context)) : input;
  }

  /** The JSON text a codec envelope's bytes hold. */
  private decodeText(bytes: Uint8Array, context: PayloadContext): string {
    let plain: Uint8Array;
    try {
      plain = this.codec!.decode(bytes, context);
    } catch (error) {
      if (error instanceof PayloadKeyError || error instanceof PayloadCodecError) throw error;
      throw new PayloadCodecError(describeContext(context), `its decode threw: ${error instanceof Error ? error.message : String(error)}.`);
    }
    return asBuffer(plain).toString('utf8');
  }

  private decodeBytes(bytes: Uint8Array, context: PayloadContext): unknown {
    let value: unknown;
    try {
      value = JSON.parse(this.decodeText(bytes, context));
    } catch (error) {
      if (!(error instanceof SyntaxError)) throw error;
      throw new PayloadCodecError(describeContext(context), 'the codec decoded it to bytes that are not JSON: it is not the codec that encoded it.');
    }
    // A user's string that starts with the mark was escaped before it was sealed.
    return typeof value === 'string' && value.startsWith(PLAIN_MARK) ? JSON.parse(value.slice(PLAIN_MARK.length)) : value;
  }

  /**
   * The text an event match value is stored and looked up by (`eventFields`, `matchKey`): its JSON
   * text, or with a codec its SHA-256, so the values a run waits for are not stored in clear.
   */
  matchText(valueJson: string): string {
    return this.codec ? `#${createHash('sha256').update(valueJson).digest('base64url')}` : valueJson;
  }

  /**
   * Stored JSON text with every envelope the codec says needs it encoded again (with the current
   * key); undefined when nothing in it needs that. For `rotatePayloads`.
   */
  rotateText(text: string, context: PayloadContext): string | undefined {
    if (!this.codec || !text.includes(CODEC_MARK_JSON)) return undefined;
    let changed = false;
    const out = text.replace(SEALED_IN_TEXT, (whole: string, base64: string) => {
      const bytes = Buffer.from(base64, 'base64url');
      if (this.codec!.needsRotation && !this.codec!.needsRotation(bytes)) return whole;
      changed = true;
      return this.seal(this.decodeText(bytes, context), context);
    });
    return changed ? out : undefined;
  }
}

/** The envelopes in a stored text (`"\u0001rfc:..."`): how many, for tests and `rotatePayloads`'s report. */
export function countSealed(text: string): number {
  return text.match(SEALED_IN_TEXT)?.length ?? 0;
}

function describePayloadBytes(bytes: Uint8Array, codec?: PayloadCodec): string {
  try {
    return codec?.describe?.(bytes) ?? describeAesGcmPayload(bytes) ?? `${bytes.length} encoded bytes`;
  } catch {
    return `${bytes.length} encoded bytes`;
  }
}

/** Payloads stored as plain JSON: a client without a codec. */
export const PLAIN_PAYLOADS = new Payloads(undefined);
