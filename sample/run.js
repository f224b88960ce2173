// `npm run sample`: the HTTP app and the worker microservice, against REDIS_URL or a local
// redis-server started here. Ctrl-C stops everything.
const { spawn } = require('node:child_process');
const { startStandalone, stopServers, hasRedisServer, NO_REDIS } = require('../scripts/redis-servers');

async function main() {
  let server;
  let url = process.env.REDIS_URL;
  if (!url) {
    if (!hasRedisServer()) {
      console.error(NO_REDIS);
      process.exit(1);
    }
    server = await startStandalone();
    url = server.url;
    console.log(`Started a local redis-server at ${url} (set REDIS_URL to use your own).`);
  }
  const port = process.env.PORT ?? '3000';
  const env = { ...process.env, REDIS_URL: url, PORT: port };
  const start = (entry) => spawn(process.execPath, ['-r', '@swc-node/register', entry], { env, stdio: 'inherit' });
  const children = [start('sample/src/worker.ts'), start('sample/src/main.ts')];
  console.log(`HTTP on http://127.0.0.1:${port}. Try:
  curl -s -XPOST localhost:${port}/orders -H 'content-type: application/json' -d '{"orderId":"ord_1","email":"ada@example.com","totalCents":1999}'
  curl -s localhost:${port}/runs/<runId>`);
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode === null ? new Promise((r) => c.on('exit', r)) : undefined)));
    if (server) await stopServers(server);
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
  for (const child of children) child.on('exit', (code) => !stopping && code !== 0 && (console.error(`A sample process exited with ${code}.`), stop()));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
