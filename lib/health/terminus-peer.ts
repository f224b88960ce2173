import { ConfigurationError } from '../core/errors';

// Loaded first by the entry point: a missing optional peer is one sentence, not a stack from deep in the require chain.
try {
  require.resolve('@nestjs/terminus');
} catch {
  throw new ConfigurationError('nestjs-redflow/health needs the optional peer @nestjs/terminus: run "npm install @nestjs/terminus".');
}
