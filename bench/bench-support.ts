/** What the benchmarks share: their own redis-server, and whole-number settings from the environment. */

export interface Servers {
  url: string;
  pids: number[];
  dir: string;
}

/** scripts/redis-servers.js, which the test harness uses too. */
export const redisServers = require('../scripts/redis-servers.js') as {
  startStandalone(): Promise<Servers>;
  stopServers(servers: Servers): Promise<void>;
  hasRedisServer(): boolean;
  NO_REDIS: string;
};

/** A whole-number setting from the environment (`fallback` when unset), at least `min`. */
export function envInt(name: string, fallback: number, min = 1): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be a whole number >= ${min}, got "${raw}".`);
  return value;
}

/** Runs a benchmark's `main` and exits with its code (1, with the error printed, if it throws). */
export function runMain(main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
