import type { FinalStatus } from '../definition/run-types';
import { closeConnection, subscriberConnection, type RedisConnection } from '../store/connection';
import type { RedisHealth } from '../store/redis-health';
import type { EndedRun } from '../store/run-queries';

type Listener = (ended: EndedRun) => void;

/** A waiter: woken by its run's end, or told that the client closed. */
interface Waiter {
  ended: Listener;
  closed: () => void;
}

/** Every listened run is read once this often, in one round trip: a lost message costs latency, never a hang. */
const SWEEP_MS = 15_000;
/** The subscription outlives its last listener this long, so back-to-back waits do not resubscribe. */
const LINGER_MS = 2_000;
const ENDED = new Set<string>(['succeeded', 'failed', 'canceled', 'compensation_failed', 'terminated']);

/**
 * Wakes `result()` and `waitForRun` when a run ends, without polling. `end_run` (end-run.lua)
 * publishes "<id>\n<status>\n<result>" on the prefix's `ended` channel; one subscriber connection
 * per client listens while someone waits and hands each message to the listeners of its run.
 *
 * A message published while the subscriber was disconnected is lost, so after every reconnect,
 * and every SWEEP_MS as a safety net, the listened runs are read in one round trip (`sweep`).
 */
export class RunEndWatcher {
  private connection: RedisConnection | undefined;
  private subscribed: Promise<void> | undefined;
  private readonly listeners = new Map<string, Set<Waiter>>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private lingerTimer: NodeJS.Timeout | undefined;
  private closed = false;

  constructor(
    private readonly redis: RedisConnection,
    private readonly channel: string,
    private readonly health: RedisHealth,
    /** Reads the runs in one round trip: the ended ones, by id. */
    private readonly read: (ids: string[]) => Promise<Map<string, EndedRun>>,
  ) {}

  /**
   * Calls `listener` once when run `id` ends, or `closed` when the watcher closes first. Returns
   * the function that stops listening.
   */
  listen(id: string, listener: Listener, closed: () => void): () => void {
    if (this.closed) {
      closed();
      return () => undefined;
    }
    let set = this.listeners.get(id);
    if (!set) this.listeners.set(id, (set = new Set()));
    const once: Waiter = {
      ended: (ended) => {
        stop();
        listener(ended);
      },
      closed,
    };
    set.add(once);
    clearTimeout(this.lingerTimer);
    this.sweepTimer ??= setInterval(() => void this.sweep(), SWEEP_MS).unref();
    const stop = () => {
      const current = this.listeners.get(id);
      if (!current?.delete(once)) return;
      if (current.size === 0) this.listeners.delete(id);
      if (this.listeners.size === 0) this.idle();
    };
    return stop;
  }

  /**
   * Resolves once the subscription is acknowledged by Redis: a run read after it cannot end
   * unnoticed. Safe to call on every wait; it subscribes once.
   */
  subscribe(): Promise<void> {
    if (this.closed) return Promise.resolve();
    if (this.subscribed) return this.subscribed;
    // On a Cluster, one node's connection, which gives up ('end') after a few failed reconnects.
    const connection = subscriberConnection(this.redis, this.health);
    this.connection = connection;
    connection.on('message', (_channel: string, message: string) => this.onMessage(message));
    let dropped = false;
    connection.on('close', () => (dropped = true));
    connection.on('ready', () => {
      if (!dropped) return;
      dropped = false;
      // ioredis subscribes again by itself; ours is queued behind it, so once it is answered the
      // channel is live, and what ended meanwhile is read.
      connection.subscribe(this.channel).then(
        () => this.sweep(),
        () => undefined,
      );
    });
    connection.on('end', () => {
      if (this.connection !== connection) return;
      this.connection = undefined;
      this.subscribed = undefined;
      // Gave up on that node: subscribe on another one, then read what ended meanwhile.
      if (this.listeners.size > 0 && !this.closed)
        this.subscribe().then(
          () => this.sweep(),
          () => undefined,
        );
    });
    const subscribed = connection.subscribe(this.channel).then(() => undefined);
    this.subscribed = subscribed;
    subscribed.catch(() => {
      // The next wait tries again on a new connection.
      if (this.connection === connection) this.drop();
    });
    return subscribed;
  }

  /** Stops listening for good and closes the subscriber. */
  async close(): Promise<void> {
    this.closed = true;
    const waiters = [...this.listeners.values()].flatMap((set) => [...set]);
    this.listeners.clear();
    for (const waiter of waiters) waiter.closed();
    await this.drop();
  }

  private onMessage(message: string): void {
    const first = message.indexOf('\n');
    if (first < 0) return;
    const id = message.slice(0, first);
    const set = this.listeners.get(id);
    if (!set) return;
    const second = message.indexOf('\n', first + 1);
    const status = message.slice(first + 1, second < 0 ? undefined : second);
    if (!ENDED.has(status)) return;
    const ended: EndedRun = { status: status as FinalStatus, payload: second < 0 ? undefined : message.slice(second + 1) };
    if (status === 'succeeded') {
      for (const waiter of [...set]) waiter.ended(ended);
      return;
    }
    // A run that did not succeed can be resumed, and a Redis Cluster forwards a PUBLISH between its
    // nodes later than it answers: the end message of a run's earlier end can reach a waiter that
    // subscribed after the resume. So such a message is checked by one read of the run, and counts
    // only if the run is still ended (what the read found is handed on, as a sweep does).
    this.read([id]).then(
      (read) => {
        const run = read.get(id);
        if (run) for (const waiter of [...(this.listeners.get(id) ?? [])]) waiter.ended(run);
      },
      () => undefined, // Redis is down: the next reconnect or sweep reads again.
    );
  }

  /** Reads every listened run in one round trip and wakes the listeners of those that ended. */
  private async sweep(): Promise<void> {
    const ids = [...this.listeners.keys()];
    if (ids.length === 0) return;
    let ended: Map<string, EndedRun>;
    try {
      ended = await this.read(ids);
    } catch {
      return; // Redis is down: the next reconnect or sweep reads again.
    }
    for (const [id, run] of ended) for (const waiter of [...(this.listeners.get(id) ?? [])]) waiter.ended(run);
  }

  /** No one listens: unsubscribe after LINGER_MS, so a client that stopped waiting gets no messages. */
  private idle(): void {
    clearInterval(this.sweepTimer);
    this.sweepTimer = undefined;
    clearTimeout(this.lingerTimer);
    this.lingerTimer = setTimeout(() => {
      if (this.listeners.size === 0) void this.drop();
    }, LINGER_MS).unref();
  }

  private async drop(): Promise<void> {
    clearInterval(this.sweepTimer);
    clearTimeout(this.lingerTimer);
    this.sweepTimer = undefined;
    const connection = this.connection;
    this.connection = undefined;
    this.subscribed = undefined;
    if (connection) await closeConnection(connection);
  }
}
