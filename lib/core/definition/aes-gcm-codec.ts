import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';

import { ConfigurationError, PayloadKeyError } from '../errors';
import { assertKnownKeys, checkInteger, describeValue, optionKeys } from './option-checks';
import type { PayloadCodec } from './payload-codec';

/** Options of `aesGcmCodec`. */
export interface AesGcmCodecOptions {
  /**
   * Every key that may have encrypted a stored payload, by id: 32 bytes each, as a Buffer, a
   * base64 string (44 characters) or a hex string (64 characters). Ids: 1-64 letters, digits,
   * ".", "_" or "-". A payload records its key's id, so old keys keep decoding after a rotation.
   */
  keys: Record<string, string | Uint8Array>;
  /** The id of the key new payloads are encrypted with. */
  current: string;
  /**
   * Compress payloads of at least `minBytes` (deflate, `node:zlib`) before encrypting them; a
   * payload that does not shrink is stored uncompressed. `true` is `{ minBytes: 1024 }`.
   * @default false
   */
  compress?: boolean | { minBytes?: number };
}

const AES_GCM_OPTION_KEYS = optionKeys<AesGcmCodecOptions>()(['keys', 'current', 'compress']);

/** The first byte of every payload this codec writes: its format. */
const FORMAT = 0xa1;
const FLAG_DEFLATED = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9._-]{1,64}$/;

function keyBytes(id: string, key: unknown): Buffer {
  let bytes: Buffer | undefined;
  if (key instanceof Uint8Array) bytes = Buffer.from(key);
  else if (typeof key === 'string' && /^[0-9a-fA-F]{64}$/.test(key)) bytes = Buffer.from(key, 'hex');
  else if (typeof key === 'string' && /^[A-Za-z0-9+/_-]{43}=?$/.test(key))
    bytes = Buffer.from(key, key.includes('-') || key.includes('_') ? 'base64url' : 'base64');
  if (!bytes || bytes.length !== 32) {
    throw new ConfigurationError(
      `aesGcmCodec key "${id}" must be 32 bytes: a Buffer, a base64 string of 44 characters or a hex string of 64, got ${typeof key === 'string' ? `a string of ${key.length} characters` : describeValue(key)}. Make one with generatePayloadKey() or \`redflow payloads keygen\`.`,
    );
  }
  return bytes;
}

/** Where the parts of an encoded payload are; undefined when the bytes are not this codec's. */
function parseHeader(bytes: Uint8Array): { keyId: string; headerEnd: number } | undefined {
  if (bytes.length < 2 || bytes[0] !== FORMAT) return undefined;
  const idLength = bytes[1];
  const headerEnd = 2 + idLength;
  if (idLength === 0 || bytes.length < headerEnd + IV_BYTES + TAG_BYTES + 1) return undefined;
  return { keyId: Buffer.from(bytes.buffer, bytes.byteOffset + 2, idLength).toString('latin1'), headerEnd };
}

/**
 * Random IVs, drawn from a pool refilled 1,024 at a time: one `randomBytes` call per IV costs more
 * than the encryption of a 1 KiB payload. Each IV is used once.
 */
class IvPool {
  private pool = Buffer.alloc(0);
  private at = 0;
  next(): Buffer {
    if (this.at + IV_BYTES > this.pool.length) {
      this.pool = randomBytes(IV_BYTES * 1024);
      this.at = 0;
    }
    this.at += IV_BYTES;
    return this.pool.subarray(this.at - IV_BYTES, this.at);
  }
}

/**
 * What the dashboard and the CLI say of a payload they cannot decode: `aes-256-gcm, key "k1"` for
 * one of `aesGcmCodec`'s, else undefined.
 */
export function describeAesGcmPayload(bytes: Uint8Array): string | undefined {
  const header = parseHeader(bytes);
  return header ? `aes-256-gcm, key "${header.keyId}"` : undefined;
}

/** A new random 256-bit key, base64: a value for `aesGcmCodec`'s `keys`. */
export function generatePayloadKey(): string {
  return randomBytes(32).toString('base64');
}

/**
 * The built-in payload codec: AES-256-GCM on `node:crypto`, with several keys and a current one.
 * Each payload is `[0xa1, key id length, key id, 12-byte IV, 16-byte tag, ciphertext]`, the
 * ciphertext of `[flags, payload]` (flags: 1 = deflated), a random IV per payload. Decoding with a
 * key id the codec lacks, or with other bytes under that id (or altered bytes: the tag does not
 * verify), throws `PayloadKeyError` naming the id.
 *
 * @example
 * RedflowModule.forRoot({ codec: aesGcmCodec({ keys: { k1: process.env.PAYLOAD_KEY_1! }, current: 'k1' }) })
 */
export function aesGcmCodec(options: AesGcmCodecOptions): PayloadCodec {
  assertKnownKeys('aesGcmCodec options', options, AES_GCM_OPTION_KEYS);
  if (typeof options.keys !== 'object' || options.keys === null || Object.keys(options.keys).length === 0) {
    throw new ConfigurationError(
      `aesGcmCodec keys must be an object of key ids and 32-byte keys, such as { k1: generatePayloadKey() }, got ${describeValue(options.keys)}.`,
    );
  }
  const keys = new Map<string, Buffer>();
  for (const [id, key] of Object.entries(options.keys)) {
    if (!KEY_ID.test(id)) throw new ConfigurationError(`aesGcmCodec key id ${JSON.stringify(id)} is invalid: use 1-64 letters, digits, ".", "_" or "-".`);
    keys.set(id, keyBytes(id, key));
  }
  const current = options.current;
  if (typeof current !== 'string' || !keys.has(current)) {
    throw new ConfigurationError(
      `aesGcmCodec current must be the id of one of its keys (${[...keys.keys()].map((k) => `"${k}"`).join(', ')}), got ${describeValue(current)}.`,
    );
  }
  const compress = options.compress === true ? {} : options.compress || undefined;
  const minBytes = compress ? checkInteger(compress.minBytes ?? 1024, 'aesGcmCodec compress.minBytes', 0, 1024 * 1024 * 1024) : Infinity;
  const currentId = Buffer.from(current, 'latin1');
  const currentKey = keys.get(current)!;
  const knownKeys = [...keys.keys()];
  const ivs = new IvPool();
  let scratch = Buffer.allocUnsafe(4096);
  const headerBytes = 2 + currentId.length;

  return {
    encode(bytes) {
      let plain: Uint8Array = bytes;
      let flags = 0;
      if (bytes.length >= minBytes) {
        const deflated = deflateRawSync(bytes);
        if (deflated.length < bytes.length) {
          plain = deflated;
          flags = FLAG_DEFLATED;
        }
      }
      // [flags, payload] in a buffer reused from call to call: the cipher reads it before this returns.
      if (scratch.length < 1 + plain.length) scratch = Buffer.allocUnsafe(Math.max(2 * scratch.length, 1 + plain.length));
      scratch[0] = flags;
      scratch.set(plain, 1);
      const iv = ivs.next();
      const cipher = createCipheriv('aes-256-gcm', currentKey, iv);
      const body = cipher.update(scratch.subarray(0, 1 + plain.length));
      cipher.final();
      // One allocation for the whole payload: header, IV, tag, then the ciphertext.
      const out = Buffer.allocUnsafe(headerBytes + IV_BYTES + TAG_BYTES + body.length);
      out[0] = FORMAT;
      out[1] = currentId.length;
      currentId.copy(out, 2);
      iv.copy(out, headerBytes);
      cipher.getAuthTag().copy(out, headerBytes + IV_BYTES);
      body.copy(out, headerBytes + IV_BYTES + TAG_BYTES);
      return out;
    },
    decode(bytes) {
      const header = parseHeader(bytes);
      if (!header) throw new Error('the stored bytes are not in the format of aesGcmCodec: they were written by another codec, or damaged');
      const key = keys.get(header.keyId);
      if (!key) throw new PayloadKeyError(header.keyId, 'unknown', knownKeys);
      const ivEnd = header.headerEnd + IV_BYTES;
      const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(header.headerEnd, ivEnd));
      decipher.setAuthTag(bytes.subarray(ivEnd, ivEnd + TAG_BYTES));
      let plain: Buffer;
      try {
        plain = decipher.update(bytes.subarray(ivEnd + TAG_BYTES));
        decipher.final();
      } catch {
        throw new PayloadKeyError(header.keyId, 'mismatch', knownKeys);
      }
      const body = plain.subarray(1);
      return (plain[0] & FLAG_DEFLATED) !== 0 ? inflateRawSync(body) : body;
    },
    needsRotation(bytes) {
      return parseHeader(bytes)?.keyId !== current;
    },
    describe(bytes) {
      return describeAesGcmPayload(bytes) ?? 'not aes-256-gcm';
    },
  };
}

/**
 * `aesGcmCodec` from the environment, as the `redflow` CLI reads it: `REDFLOW_PAYLOAD_KEYS` holds
 * `id:key` pairs separated by commas (keys in base64 or hex), `REDFLOW_PAYLOAD_KEY` the current
 * id (default: the last pair's), `REDFLOW_PAYLOAD_COMPRESS` a `minBytes` to compress from.
 * Undefined when `REDFLOW_PAYLOAD_KEYS` is unset or empty.
 */
export function aesGcmCodecFromEnv(env: Record<string, string | undefined> = process.env): PayloadCodec | undefined {
  const text = env.REDFLOW_PAYLOAD_KEYS?.trim();
  if (!text) return undefined;
  const keys: Record<string, string> = {};
  let last = '';
  for (const pair of text.split(',')) {
    const at = pair.indexOf(':');
    if (at <= 0) throw new ConfigurationError('REDFLOW_PAYLOAD_KEYS must be id:key pairs separated by commas, such as "k1:<base64 key>,k2:<base64 key>".');
    last = pair.slice(0, at).trim();
    keys[last] = pair.slice(at + 1).trim();
  }
  const compressFrom = env.REDFLOW_PAYLOAD_COMPRESS?.trim();
  const minBytes = compressFrom ? Number(compressFrom) : undefined;
  if (minBytes !== undefined && !Number.isInteger(minBytes)) {
    throw new ConfigurationError(`REDFLOW_PAYLOAD_COMPRESS must be a number of bytes to compress payloads from, got ${JSON.stringify(compressFrom)}.`);
  }
  return aesGcmCodec({ keys, current: env.REDFLOW_PAYLOAD_KEY?.trim() || last, ...(minBytes === undefined ? {} : { compress: { minBytes } }) });
}
