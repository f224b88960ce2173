// Starts and stops the isolated Redis servers the tests use (plain Node, shared by jest's global
// setup, the benchmark and the sample). No persistence, a free port, a private directory.
const { spawn, spawnSync, execFileSync } = require('node:child_process');
const { mkdtempSync, readFileSync, rmSync } = require('node:fs');
const net = require('node:net');
const { tmpdir } = require('node:os');
const { join } = require('node:path');

const NO_REDIS =
  'No redis-server binary was found and REDIS_URL is not set: install Redis (Debian: apt-get install -y redis-server) or set REDIS_URL to a Redis you can write to.';

function hasRedisServer() {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(check, what, timeoutMs = 15_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if (check()) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}.`);
    await sleep(50);
  }
}

function cli(port, ...args) {
  return execFileSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
}

async function startNode(dir, extra = []) {
  const port = await freePort();
  const pidfile = join(dir, `redis-${port}.pid`);
  const child = spawn(
    'redis-server',
    [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--daemonize',
      'yes',
      '--pidfile',
      pidfile,
      '--dir',
      dir,
      '--logfile',
      join(dir, `redis-${port}.log`),
      ...extra,
    ],
    { stdio: 'ignore' },
  );
  await new Promise((resolve) => child.on('exit', resolve));
  await waitFor(() => cli(port, 'ping').trim() === 'PONG', `redis-server on port ${port}`);
  // Never keep 0 (an empty pid file read too early): process.kill(0) signals the whole process group.
  await waitFor(() => Number(readFileSync(pidfile, 'utf8').trim()) > 0, `the pid file of redis-server on port ${port}`);
  const pid = Number(readFileSync(pidfile, 'utf8').trim());
  return { port, pid };
}

/** Starts one standalone server. Returns { url, pids, dir }. */
async function startStandalone() {
  if (!hasRedisServer()) throw new Error(NO_REDIS);
  const dir = mkdtempSync(join(tmpdir(), 'redflow-redis-'));
  const node = await startNode(dir);
  return { url: `redis://127.0.0.1:${node.port}`, pids: [node.pid], dir };
}

/** Starts a 3-master Redis Cluster. Returns { nodes: "host:port,...", pids, dir }. */
async function startCluster() {
  if (!hasRedisServer()) throw new Error(NO_REDIS);
  const dir = mkdtempSync(join(tmpdir(), 'redflow-cluster-'));
  const nodes = [];
  for (let i = 0; i < 3; i++) {
    nodes.push(await startNode(dir, ['--cluster-enabled', 'yes', '--cluster-config-file', `nodes-${i}.conf`, '--cluster-node-timeout', '5000']));
  }
  const addresses = nodes.map((n) => `127.0.0.1:${n.port}`);
  execFileSync('redis-cli', ['--cluster', 'create', ...addresses, '--cluster-replicas', '0', '--cluster-yes'], { stdio: 'ignore' });
  for (const n of nodes) await waitFor(() => cli(n.port, 'cluster', 'info').includes('cluster_state:ok'), `cluster node ${n.port}`);
  return { nodes: addresses.join(','), pids: nodes.map((n) => n.pid), dir };
}

/** Stops servers started above and removes their directory. */
async function stopServers({ pids, dir }) {
  for (const pid of pids) {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  for (const pid of pids) {
    await waitFor(
      () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      `redis-server ${pid} to exit`,
      10_000,
    ).catch(() => process.kill(pid, 'SIGKILL'));
  }
  rmSync(dir, { recursive: true, force: true });
}

module.exports = { startStandalone, startCluster, stopServers, hasRedisServer, NO_REDIS };
