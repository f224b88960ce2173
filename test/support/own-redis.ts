import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A redis-server of one test file's own, for faults that must not touch the shared test Redis:
 * memory limits, SIGSTOP, kill and restart on the same port.
 */
export class OwnRedis {
  private constructor(
    readonly port: number,
    private readonly dir: string,
    private pid: number,
    private readonly extra: string[],
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts a server on a free port; `extra` are more redis-server arguments. */
  static async start(extra: string[] = []): Promise<OwnRedis> {
    const dir = mkdtempSync(join(tmpdir(), 'redflow-own-redis-'));
    const port = await freePort();
    const server = new OwnRedis(port, dir, 0, extra);
    await server.launch();
    return server;
  }

  /** Runs redis-cli against this server and returns its output. */
  cli(...args: string[]): string {
    const out = spawnSync('redis-cli', ['-p', String(this.port), ...args], { encoding: 'utf8' });
    return out.stdout.trim();
  }

  /** Freezes the server (SIGSTOP): connections stay open, nothing is answered. */
  pause(): void {
    process.kill(this.pid, 'SIGSTOP');
  }

  resume(): void {
    process.kill(this.pid, 'SIGCONT');
  }

  /** Kills the server at once (SIGKILL) and waits until it is gone. */
  async kill(): Promise<void> {
    try {
      process.kill(this.pid, 'SIGCONT');
      process.kill(this.pid, 'SIGKILL');
    } catch {
      return;
    }
    await waitUntil(() => !alive(this.pid), 10_000);
  }

  /** Starts the server again on the same port and directory. */
  async restart(): Promise<void> {
    await this.launch();
  }

  async stop(): Promise<void> {
    await this.kill();
    rmSync(this.dir, { recursive: true, force: true });
  }

  private async launch(): Promise<void> {
    const pidfile = join(this.dir, 'redis.pid');
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'yes'];
    args.push('--pidfile', pidfile, '--dir', this.dir, '--logfile', join(this.dir, 'redis.log'), ...this.extra);
    const child = spawn('redis-server', args, { stdio: 'ignore' });
    await new Promise((resolve) => child.on('exit', resolve));
    await waitUntil(() => this.cli('ping') === 'PONG', 10_000);
    // Never keep 0 (an empty pid file read too early): process.kill(0) signals the whole process group.
    await waitUntil(() => {
      try {
        return Number(readFileSync(pidfile, 'utf8').trim()) > 0;
      } catch {
        return false;
      }
    }, 10_000);
    this.pid = Number(readFileSync(pidfile, 'utf8').trim());
  }
}

function alive(pid: number): boolean {
  if (!(pid > 0)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function waitUntil(check: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`Timed out after ${timeoutMs} ms waiting for redis-server.`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
