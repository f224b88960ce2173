import { checkScheduleBounds, checkSchedulePolicies, cronIds, decodeCron, encodeCron, nextTickOf, triggerSchedule } from '../definition/cron';
import { registryFlowControl } from '../definition/flow-control';
import { assertKnownKeys, checkInteger, checkUserName, versionQueue } from '../definition/option-checks';
import type { WorkflowRegistry } from '../definition/workflow';
import { ConfigurationError } from '../errors';
import type { ClientContext } from './client-context';

/** The options of `syncRegistry`. */
export interface SyncRegistryOptions {
  owner: string;
  defaultMaxConcurrency?: number;
  prune?: boolean;
}

/** Records `registry` in Redis under `options.owner` (see `WorkflowClient.syncRegistry`); returns the removed workflow names. */
export async function syncRegistry(ctx: ClientContext, registry: WorkflowRegistry, options: SyncRegistryOptions): Promise<string[]> {
  assertKnownKeys('syncRegistry options', options, ['owner', 'defaultMaxConcurrency', 'prune']);
  if (!options.owner) throw new ConfigurationError('syncRegistry needs an owner: a stable id of the app that defines these workflows.');
  checkUserName(options.owner, 'syncRegistry owner');
  if (options.defaultMaxConcurrency !== undefined && options.defaultMaxConcurrency !== Infinity) {
    checkInteger(options.defaultMaxConcurrency, 'syncRegistry defaultMaxConcurrency', 1, 1_000_000);
  }
  const now = ctx.clock.now();
  const entries = registry.list().map((d) => {
    const limit = d.maxConcurrency ?? options.defaultMaxConcurrency ?? Infinity;
    const ids = cronIds(d);
    const crons = (d.options.cron ?? []).map((trigger, i) => {
      const what = `cron trigger "${ids[i]}" of workflow "${d.name}"`;
      const def = encodeCron(
        d.name,
        { ...triggerSchedule(trigger), input: trigger.input },
        { ...checkSchedulePolicies(trigger, what), ...checkScheduleBounds(trigger, what) },
        ctx.payloads.codec !== undefined,
      );
      return { id: ids[i], def, next: nextTickOf(decodeCron(def), now) ?? '' };
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
  return ctx.call(() => ctx.scripts.syncRegistry(options.owner, now, options.prune ?? true, entries));
}
