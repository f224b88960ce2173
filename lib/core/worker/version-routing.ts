import type { RedflowLogger } from '../definition/logger';
import { parseVersionQueue, versionQueue } from '../definition/option-checks';
import type { WorkflowRegistry } from '../definition/workflow';
import type { WorkflowDefinition } from '../definition/workflow-types';

/**
 * Which lists a worker claims from, given the versions of its workflows, and what it does with a
 * run of a version it does not have. A workflow at version N > 1 has its runs in `<queue>@v<N>`;
 * see docs/engine.md ("Versions").
 */

/**
 * The lists a worker claims from for its queues: a queue itself (version 1, or no workflow of the
 * registry on it) and `<queue>@v<N>` for each version N > 1 of a workflow of the registry on it.
 */
export function versionQueues(queues: string[], registry: WorkflowRegistry): string[] {
  const served = new Set<string>();
  for (const queue of queues) {
    const versions = registry
      .list()
      .filter((d) => d.queue === queue)
      .map((d) => d.version);
    if (!versions.length || versions.includes(1)) served.add(queue);
    for (const version of versions) served.add(versionQueue(queue, version));
  }
  return [...served];
}

/**
 * For each list a worker claims from, the workflows of its registry on the same queue at another
 * version (a version-1 queue shared by workflow B at v1 and workflow A at v2): their runs in that
 * list are left by the claim for a worker with their version. Only lists that have some.
 */
export function claimSkips(lists: string[], registry: WorkflowRegistry): Map<string, string[]> {
  const skips = new Map<string, string[]>();
  for (const list of lists) {
    const { queue, version } = parseVersionQueue(list);
    const others = registry
      .list()
      .filter((d) => d.queue === queue && d.version !== version)
      .map((d) => d.name);
    if (others.length) skips.set(list, others);
  }
  return skips;
}

/** A worker's version routing: the lists it claims from, what its claims leave there, and the warnings about versions (each once). */
export class VersionRouting {
  /** Per list, the workflows whose runs the claim leaves there (see claimSkips; `versionMismatch` adds). */
  readonly claimSkips: Map<string, readonly string[]>;
  /** Keys of the warnings given (`<workflow> v<N>`, `<workflow> left in <list>`, ...). */
  private readonly warned = new Set<string>();

  constructor(
    /** The lists claimed from (see versionQueues). */
    readonly lists: readonly string[],
    private readonly registry: WorkflowRegistry,
    private readonly workerId: string,
    private readonly logger: RedflowLogger,
  ) {
    this.claimSkips = claimSkips([...lists], registry);
  }

  /** The workflows this worker runs: those of its registry on the lists it claims from. */
  servedDefinitions(): WorkflowDefinition[] {
    return this.registry.list().filter((d) => this.lists.includes(versionQueue(d.queue, d.version)));
  }

  /** The workflow versions this worker runs. */
  servedVersions(): Array<[string, number]> {
    return this.servedDefinitions().map((d) => [d.name, d.version]);
  }

  /** Logs `message` once per `key`, until `forget(key)`. */
  warnOnce(key: string, message: string): void {
    if (this.warned.has(key)) return;
    this.warned.add(key);
    this.logger.warn(message);
  }

  forget(key: string): void {
    this.warned.delete(key);
  }

  /** The claim left runs of `workflow` in `list`: they belong to another version than this worker's (warned once). */
  leftForVersion(list: string, workflow: string): void {
    const listVersion = parseVersionQueue(list).version;
    this.warnOnce(
      `${workflow} left in ${list}`,
      `Worker "${this.workerId}" has workflow "${workflow}" at v${this.registry.get(workflow)?.version}, and claims from queue "${list}" for its other workflows, where runs of "${workflow}" v${listVersion} wait: it leaves them there for a worker with version ${listVersion}, and checks that queue once a second while they wait instead of waiting on it. Keep workflows of different versions on different queues to avoid this.`,
    );
  }

  /** A run of another version was claimed from `list` (a workflow defined after this worker started): later claims leave such runs. */
  versionMismatch(list: string, workflow: string, runVersion: number, ownVersion: number): void {
    const skip = this.claimSkips.get(list) ?? [];
    if (!skip.includes(workflow)) this.claimSkips.set(list, [...skip, workflow]);
    this.warnOnce(
      `${workflow} v${runVersion} here`,
      `Worker "${this.workerId}" claimed a run of workflow "${workflow}" v${runVersion} but has v${ownVersion}: it hands such runs back for a worker with version ${runVersion}, and its claims leave them from now on. Keep workflows of different versions on different queues to avoid this.`,
    );
  }
}
