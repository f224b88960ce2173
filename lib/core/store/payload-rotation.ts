import type { RedisConnection } from './connection';
import type { RedflowKeys } from './keys';
import type { Payloads } from './payloads';
import { scanPrefix } from './prefix-scan';
import type { RedisScripts } from './redis-scripts';
import { pipelineReplies } from './run-queries';

/** What `rotatePayloads` did. */
export interface PayloadRotationReport {
  /** Keys of the prefix looked at. */
  keys: number;
  /** Stored values encoded again (a value can hold several payloads: a step record, a race). */
  rotated: number;
  /** Values that changed while they were being rotated: left to their writer; run the rotation again to take them. */
  skipped: number;
}

/**
 * Encodes again, with the codec's current key, every stored payload the codec says needs it
 * (`needsRotation`): run hashes (inputs, outputs, step records, progress, values), schedules'
 * inputs, buffered signals and pending events. Batch by batch (SCAN), each value replaced by
 * `rotate-payload-1.lua` only while it is still what was read, so runs in flight go on; what a
 * worker rewrote meanwhile it wrote with its own codec. Streams, sets and sorted sets hold no
 * payloads.
 */
export async function rotatePayloads(
  redis: RedisConnection,
  keys: RedflowKeys,
  scripts: RedisScripts,
  payloads: Payloads,
  onBatch?: (report: PayloadRotationReport) => void,
): Promise<PayloadRotationReport> {
  const report: PayloadRotationReport = { keys: 0, rotated: 0, skipped: 0 };
  const replace = async (key: string, type: 'hash' | 'string' | 'list', field: string, old: string) => {
    const next = payloads.rotateText(old, { kind: 'step' });
    if (next === undefined) return;
    if (await scripts.rotatePayload(key, type, field, old, next)) report.rotated++;
    else report.skipped++;
  };
  await scanPrefix(redis, keys, '*', async (found, node) => {
    report.keys += found.length;
    const types = (await pipelineReplies(
      node,
      found.map((key) => ['type', key]),
    )) as string[];
    for (let i = 0; i < found.length; i++) {
      const key = found[i];
      if (types[i] === 'hash') {
        for (const [field, value] of Object.entries(await node.hgetall(key))) await replace(key, 'hash', field, value);
      } else if (types[i] === 'string') {
        const value = await node.get(key);
        if (value !== null) await replace(key, 'string', '', value);
      } else if (types[i] === 'list') {
        const values = await node.lrange(key, 0, -1);
        for (let j = 0; j < values.length; j++) await replace(key, 'list', String(j), values[j]);
      }
    }
    onBatch?.({ ...report });
  });
  return report;
}
