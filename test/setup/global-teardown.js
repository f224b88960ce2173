const { stopServers } = require('../../scripts/redis-servers');

module.exports = async function globalTeardown() {
  if (globalThis.__redflowServers) await stopServers(globalThis.__redflowServers);
};
