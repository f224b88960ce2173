import { createAdmin } from '../../core/client/admin';
import { generatePayloadKey } from '../../core/definition/aes-gcm-codec';
import type { ClientCommand, ServerCommand } from '../cli-command';
import { CliError } from '../cli-error';
import { out, warn } from '../print';

/*
 * `redflow payloads rotate | keygen`: the payload codec's keys. The CLI's codec is aesGcmCodec
 * from REDFLOW_PAYLOAD_KEYS ("id:key,id:key"), REDFLOW_PAYLOAD_KEY (the current id) and
 * REDFLOW_PAYLOAD_COMPRESS (redis.ts, cliCodec).
 */

const KEYS_HELP = `Payload keys: REDFLOW_PAYLOAD_KEYS="k1:<base64 key>,k2:<base64 key>" (every key that may have encrypted a payload),
REDFLOW_PAYLOAD_KEY=k2 (the current one; default: the last listed). Without them, encrypted payloads show as
{ "encrypted": "aes-256-gcm, key \\"k1\\"" }.`;

/** `redflow payloads rotate`: re-encrypts every stored payload not under the current key. */
export const payloadsRotateCommand: ClientCommand = {
  usage: 'redflow payloads rotate',
  help: `payloads rotate: re-encrypts, batch by batch, every stored payload with the current key; runs go on meanwhile.
Run it again until it reports 0 skipped before removing an old key. ${KEYS_HELP}`,
  async run(client, { print }) {
    if (!client.context.payloads.codec) throw new CliError(`redflow payloads rotate needs the keys. ${KEYS_HELP}`);
    const report = await createAdmin(client).rotatePayloads({ onBatch: (r) => warn(`... ${r.keys} keys looked at, ${r.rotated} values re-encrypted`) });
    const again = report.skipped ? `; ${report.skipped} changed meanwhile: run it again` : '';
    print(report, () => `Re-encrypted ${report.rotated} stored values with the current key (${report.keys} keys looked at${again}).`);
  },
};

/** `redflow payloads keygen`: a new random 256-bit key, base64. */
export const payloadsKeygenCommand: ServerCommand = {
  usage: 'redflow payloads keygen',
  help: 'payloads keygen: prints a new random 256-bit key (base64) for aesGcmCodec or REDFLOW_PAYLOAD_KEYS.',
  serve() {
    out(generatePayloadKey());
    return Promise.resolve();
  },
};
