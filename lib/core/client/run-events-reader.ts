import type { RedflowLogger } from '../definition/logger';
import { checkRunEventsOptions, startOf, toRunEvents, type RunEvent, type RunEventsOptions, type RunEventType } from '../definition/run-events';
import { duplicateConnection, type ConnectionWatcher, type RedisConnection } from '../store/connection';
import { lastEntryId, readEntries, type StreamReply } from '../store/event-stream-reads';
import { outageKind } from '../store/redis-health';
import type { ClientContext } from './client-context';

/** What `RunEventStream` needs: checked `client.events()` options. */
export interface RunEventReaderSettings {
  workflow?: string;
  runId?: string;
  types: ReadonlySet<RunEventType> | undefined;
  from: string;
  bufferSize: number;
  blockMs: number;
}

const RETRY_MIN_MS = 100;
const RETRY_MAX_MS = 2_000;

/**
 * The events of `client.events()`: an async iterable over the stream `{prefix}:events`, read with
 * `XREAD BLOCK` on a connection of its own. It holds at most `bufferSize` events: it reads Redis
 * only when it has room (COUNT = the room left), so a slow consumer leaves the rest in Redis. An
 * entry (the events of one script) that does not fit is read again when there is room. It
 * remembers the last id read, so after a connection error or a Redis restart it reads again from
 * there. `break`, `await using`, `close()` close it and its connection.
 */
export class RunEventStream implements AsyncIterable<RunEvent>, AsyncDisposable {
  private readonly connection: RedisConnection;
  private queue: RunEvent[] = [];
  private head = 0;
  private lastId: string | undefined;
  /** The entry of the position a reader resumed from, and the last index in it already handled. */
  private skip: { id: string; upTo: number } | undefined;
  private closed = false;
  private failure: unknown;
  private wakeConsumer: (() => void) | undefined;
  private wakeReader: (() => void) | undefined;
  private readonly pump: Promise<void>;
  /** Settles once the reader knows where it starts (`from: 'now'`: the stream's last id when `events()` was called). */
  readonly ready: Promise<void>;

  constructor(
    redis: RedisConnection,
    private readonly key: string,
    private readonly settings: RunEventReaderSettings,
    private readonly logger: RedflowLogger,
    /** Takes the errors of the stream's own connection (the client's RedisHealth). */
    watcher: ConnectionWatcher,
    /** Called once when the stream closes (the client stops tracking it). */
    private readonly onClose: () => void = () => undefined,
  ) {
    // '$' resolved now, on the client's own connection: a script this client sends after
    // events() returned runs after this read, so its events are not missed.
    const from = settings.from === 'now' ? undefined : startOf(settings.from);
    // Resuming from an event's position reads its entry again and skips the events up to it.
    this.skip = from?.skip;
    const start = from ? Promise.resolve(from.after) : lastEntryId(redis, key);
    this.ready = start.then(
      (id) => {
        this.lastId ??= id;
      },
      (error: unknown) => {
        this.fail(error);
      },
    );
    this.connection = duplicateConnection(redis, watcher);
    this.pump = this.ready.then(() => this.read());
  }

  /** Events read and not yet handed to the consumer (never more than `bufferSize`). */
  get buffered(): number {
    return this.queue.length - this.head;
  }

  /** The id of the last stream entry read from Redis (handed out or still buffered). */
  get lastReadId(): string | undefined {
    return this.lastId;
  }

  [Symbol.asyncIterator](): AsyncIterator<RunEvent> {
    return {
      next: () => this.next(),
      return: async () => {
        await this.close();
        return { done: true, value: undefined };
      },
    };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }

  /** Stops reading and closes the connection. Idempotent. */
  async close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.onClose();
      this.connection.disconnect();
      this.wakeReader?.();
      this.wakeConsumer?.();
    }
    await this.pump;
  }

  private async next(): Promise<IteratorResult<RunEvent>> {
    for (;;) {
      if (this.buffered > 0) {
        const event = this.queue[this.head];
        this.queue[this.head++] = undefined as unknown as RunEvent;
        if (this.head > 1024 && this.head * 2 > this.queue.length) {
          this.queue = this.queue.slice(this.head);
          this.head = 0;
        }
        this.wakeReader?.();
        return { done: false, value: event };
      }
      if (this.failure !== undefined) {
        const failure = this.failure;
        this.failure = undefined;
        await this.close();
        throw failure;
      }
      if (this.closed) return { done: true, value: undefined };
      await new Promise<void>((resolve) => (this.wakeConsumer = resolve));
      this.wakeConsumer = undefined;
    }
  }

  private fail(error: unknown): void {
    this.failure = error;
    this.closed = true;
    this.connection?.disconnect();
    this.wakeConsumer?.();
  }

  private matches(event: RunEvent): boolean {
    const s = this.settings;
    return (
      (s.workflow === undefined || event.workflow === s.workflow) &&
      (s.runId === undefined || event.runId === s.runId) &&
      (s.types === undefined || s.types.has(event.type))
    );
  }

  private async read(): Promise<void> {
    let retryMs = RETRY_MIN_MS;
    let outage = false;
    while (!this.closed) {
      const room = this.settings.bufferSize - this.buffered;
      if (room <= 0) {
        await new Promise<void>((resolve) => (this.wakeReader = resolve));
        this.wakeReader = undefined;
        continue;
      }
      let reply: StreamReply;
      try {
        reply = await readEntries(this.connection, this.key, this.lastId as string, room, this.settings.blockMs);
      } catch (error) {
        if (this.closed) return;
        if (!outageKind(error) && !/closed|reset|ECONN|EPIPE/i.test(String((error as Error)?.message))) {
          this.fail(error);
          return;
        }
        if (!outage)
          this.logger.warn(
            `The event stream reader lost Redis (${(error as Error).message.split('\n')[0]}); it reads again after event ${this.lastId} once Redis is back.`,
          );
        outage = true;
        await new Promise((resolve) => setTimeout(resolve, retryMs));
        retryMs = Math.min(retryMs * 2, RETRY_MAX_MS);
        continue;
      }
      outage = false;
      retryMs = RETRY_MIN_MS;
      if (this.closed) return;
      const entries = reply?.[0]?.[1] ?? [];
      let added = false;
      let full = false;
      for (const [id, flat] of entries) {
        const skip = this.skip;
        const events = toRunEvents(id, flat).filter((event, i) => this.matches(event) && !(skip?.id === id && i <= skip.upTo));
        // An entry whose events do not fit is read again when there is room (one that is larger
        // than the whole buffer is taken when the buffer is empty).
        if (events.length > this.settings.bufferSize - this.buffered && this.buffered > 0) {
          full = true;
          break;
        }
        this.lastId = id;
        this.skip = undefined;
        for (const event of events) this.queue.push(event);
        if (events.length) added = true;
      }
      if (added) this.wakeConsumer?.();
      if (full && !this.closed) {
        await new Promise<void>((resolve) => (this.wakeReader = resolve));
        this.wakeReader = undefined;
      }
    }
  }
}

/** The event streams a client opened (`client.events()`), so that closing the client closes them. */
export class RunEventStreams {
  private readonly open = new Set<RunEventStream>();

  constructor(private readonly ctx: ClientContext) {}

  /** A new stream over the prefix's events, with checked `client.events()` options. */
  events(options?: RunEventsOptions): RunEventStream {
    const settings = checkRunEventsOptions(options);
    const { redis, keys, logger, health } = this.ctx;
    const stream: RunEventStream = new RunEventStream(redis, keys.events(), settings, logger, health, () => this.open.delete(stream));
    this.open.add(stream);
    return stream;
  }

  /** Closes the streams still open. */
  async close(): Promise<void> {
    await Promise.all([...this.open].map((stream) => stream.close()));
  }
}
