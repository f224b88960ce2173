import { openConnection } from '../store/connection';
import { ConfigurationError } from '../errors';
import { assertKnownKeys, checkInteger, checkUserName, versionQueue } from '../definition/option-checks';
import { registryFlowControl } from '../definition/flow-control';
import type { WorkflowRegistry } from '../definition/workflow';
import { cronIds, encodeCron, nextCronTick } from '../definition/cron';

import { RunControl } from './run-control';
import type { ClientOptions } from './client-core';

export type { RunHandle } from '../definition/run-types';
export type { CountRunsOptions, EmitEventOptions, ListRunsOptions, PruneOptions, RunOptions } from '../definition/run-options';
export type { ScheduleOptions } from '../definition/schedule-types';
export { CLIENT_OPTION_KEYS, DEFAULT_COMMAND_TIMEOUT_MS, newRunId, type ClientOptions } from './client-core';
export { RUN_INDEX_LEASE_MS } from './run-reader';

/**
 * Starts, inspects and cancels runs. Create one with `createClient`. Its methods live with their
 * concept: `client-core.ts` (connection and calls), `run-reader.ts`, `run-handle.ts`,
 * `producer.ts`, `run-control.ts`; registry sync is here.
 */
export class WorkflowClient extends RunControl {
  /**
   * Records the registry's workflows in Redis under `owner` (queue, limits, event subscriptions,
   * cron schedules), and removes what this owner registered before but no longer defines (unless
   * `prune: false`). Returns the removed workflow names.
   */
  async syncRegistry(registry: WorkflowRegistry, options: { owner: string; defaultMaxConcurrency?: number; prune?: boolean }): Promise<string[]> {
    assertKnownKeys('syncRegistry options', options, ['owner', 'defaultMaxConcurrency', 'prune']);
    if (!options.owner) throw new ConfigurationError('syncRegistry needs an owner: a stable id of the app that defines these workflows.');
    checkUserName(options.owner, 'syncRegistry owner');
    if (options.defaultMaxConcurrency !== undefined && options.defaultMaxConcurrency !== Infinity) {
      checkInteger(options.defaultMaxConcurrency, 'syncRegistry defaultMaxConcurrency', 1, 1_000_000);
    }
    const now = this.clock.now();
    const entries = registry.list().map((d) => {
      const limit = d.maxConcurrency ?? options.defaultMaxConcurrency ?? 1;
      const ids = cronIds(d);
      const crons = (d.options.cron ?? []).map((trigger, i) => {
        return { id: ids[i], def: encodeCron(d.name, trigger), next: nextCronTick(d.name, trigger, now) };
      });
      return JSON.stringify({
        name: d.name,
        queue: versionQueue(d.queue, d.version),
        version: d.version,
        maxAttempts: d.maxAttempts,
        maxConcurrency: limit === Infinity ? 0 : limit,
        events: (d.options.event ?? []).map((e) => e.name),
        crons,
        flow: registryFlowControl(d),
      });
    });
    return this.call(() => this.scripts.syncRegistry(options.owner, now, options.prune ?? true, entries));
  }
}

/** Creates a client: `createClient({ url })`, `createClient({ redis })`, plus `prefix`, `registry`. */
export function createClient(options: ClientOptions = {}): WorkflowClient {
  const { redis, owned } = openConnection(options);
  return new WorkflowClient(redis, owned, options);
}
