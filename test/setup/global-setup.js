// Jest global setup: one isolated Redis for the whole run (a 3-master cluster when
// REDFLOW_TEST_CLUSTER=1). Test files read the addresses from the environment.
const { startCluster, startStandalone } = require('../../scripts/redis-servers');

module.exports = async function globalSetup() {
  // `npm run test:unit`: pure modules only, no Redis at all.
  if (process.env.REDFLOW_UNIT_ONLY === '1') return;
  if (process.env.REDFLOW_TEST_CLUSTER === '1') {
    const cluster = await startCluster();
    process.env.REDFLOW_TEST_CLUSTER_NODES = cluster.nodes;
    globalThis.__redflowServers = cluster;
    return;
  }
  if (process.env.REDIS_URL) {
    process.env.REDFLOW_TEST_REDIS_URL = process.env.REDIS_URL;
    return;
  }
  const server = await startStandalone();
  process.env.REDFLOW_TEST_REDIS_URL = server.url;
  globalThis.__redflowServers = server;
};
