import { ConfigurationError } from '../core/errors';

// Loaded first by the entry points: a missing optional peer is one sentence, not a stack from deep in the require chain.
try {
  require.resolve('prom-client');
} catch {
  throw new ConfigurationError('nestjs-redflow/metrics needs the optional peer prom-client: run "npm install prom-client".');
}
