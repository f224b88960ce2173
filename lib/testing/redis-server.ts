import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Thrown by `createTestEngine()` when it must start a Redis and no `redis-server` is installed. */
export class RedisServerNotFoundError extends Error {
  override name = 'RedisServerNotFoundError';
  constructor() {
    super(
      'createTestEngine() found no redis-server binary and no REDIS_URL: install Redis (Debian/Ubuntu: apt-get install -y redis-server; macOS: brew install redis), set REDIS_URL to a Redis the tests may write to, or pass { url } or { redis }.',
    );
  }
}

/** Thrown when a `redis-server` the test engine started does not come up. */
export class RedisServerStartError extends Error {
  override name = 'RedisServerStartError';
}

/**
 * A throwaway `redis-server` of one test engine: no persistence, a private directory, listening
 * on a Unix socket in that directory only (no TCP port, so parallel test files never collide).
 * Started synchronously, so `createTestEngine()` can stay synchronous. Its life is tied to the
 * process that started it: a small watchdog (`sh`) stops the server and deletes its directory
 * once that process is gone, even when it was killed and never called `close()`.
 */
export class TestRedisServer {
  private constructor(
    /** The server's Unix socket path. */
    readonly socket: string,
    /** The server's process id. */
    readonly pid: number,
    private readonly dir: string,
    private readonly watchdog: ChildProcess | undefined,
  ) {}

  /** Starts a server and waits (at most 10 s) until it accepts connections. */
  static start(): TestRedisServer {
    if (spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status !== 0) throw new RedisServerNotFoundError();
    const dir = mkdtempSync(join(tmpdir(), 'redflow-test-redis-'));
    const socket = join(dir, 'redis.sock');
    const pidfile = join(dir, 'redis.pid');
    const args = ['--port', '0', '--unixsocket', socket, '--unixsocketperm', '700', '--save', '', '--appendonly', 'no'];
    args.push('--daemonize', 'yes', '--pidfile', pidfile, '--dir', dir, '--logfile', join(dir, 'redis.log'));
    const started = spawnSync('redis-server', args, { stdio: 'ignore' });
    const deadline = Date.now() + 10_000;
    // The pid file exists before redis writes its pid: wait for a pid, never read an empty file as 0
    // (process.kill(0) would signal this whole process group).
    while (!(existsSync(socket) && pidIn(pidfile) > 0)) {
      if (started.status !== 0 || Date.now() > deadline) {
        const log = existsSync(join(dir, 'redis.log')) ? readFileSync(join(dir, 'redis.log'), 'utf8').slice(-500) : '';
        rmSync(dir, { recursive: true, force: true });
        throw new RedisServerStartError(`The redis-server started by createTestEngine() did not come up within 10 s. Its log ends with: ${log || '(empty)'}`);
      }
      // A short synchronous pause: the daemon needs a few ms to create its socket.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
    const pid = pidIn(pidfile);
    return new TestRedisServer(socket, pid, dir, watch(process.pid, pid, dir));
  }

  /** Stops the server, waits until its process is gone and deletes its directory. */
  async stop(): Promise<void> {
    this.watchdog?.kill('SIGKILL');
    if (!(this.pid > 0)) throw new RedisServerStartError(`The test redis-server has no valid pid (${this.pid}); not signalling it.`);
    try {
      process.kill(this.pid, 'SIGTERM');
    } catch {
      // already gone
    }
    const deadline = Date.now() + 10_000;
    while (isAlive(this.pid)) {
      if (Date.now() > deadline) {
        process.kill(this.pid, 'SIGKILL');
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * Starts the watchdog of a server: a detached `sh` that checks every half second whether process
 * `owner` still exists and, once it does not, stops the server `pid` and deletes `dir`. Unref'd:
 * it never keeps the owner alive. Undefined where there is no `sh` (the server is then stopped by
 * `close()` only).
 */
function watch(owner: number, pid: number, dir: string): ChildProcess | undefined {
  const script = 'while kill -0 "$1" 2>/dev/null; do sleep 0.5; done; kill "$2" 2>/dev/null; sleep 1; kill -9 "$2" 2>/dev/null; rm -rf "$3"';
  try {
    const child = spawn('sh', ['-c', script, 'redflow-test-redis-watchdog', String(owner), String(pid), dir], { detached: true, stdio: 'ignore' });
    child.on('error', () => undefined);
    child.unref();
    return child;
  } catch {
    return undefined;
  }
}

/** The pid in a pid file: 0 while it is missing or not written yet. */
function pidIn(file: string): number {
  try {
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : 0;
  } catch {
    return 0;
  }
}

/** Whether a process with this id exists (never true for 0 or less: those name process groups). */
export function isAlive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
