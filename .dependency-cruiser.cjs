/**
 * The architecture of nestjs-redflow, checked by `npm run deps` (part of `npm test`).
 *
 *   lib/core/errors/          every error class and the error table; imports nothing of ours but the duration syntax
 *   lib/core/definition/      workflow definitions, options, durations, retry, cron: pure, no I/O
 *   lib/core/store/           Redis: connection, keys, codecs, Lua scripts and their loader
 *   lib/core/client/          producing, controlling, waiting for and reading runs
 *   lib/core/worker/          the worker loop, run executor, step runtime, cron ticker, reaper
 *   lib/dashboard/            the dashboard's API and page, and the standalone dashboard's login gate, framework-free
 *   lib/nest/                 the Nest module, decorators, explorer, orchestrator
 *   lib/microservice/         `nestjs-redflow/microservice`: RedflowServer, the only code that needs
 *                             the optional peer @nestjs/microservices
 *   lib/cli/                  the `redflow` command
 *   lib/otel/                 `nestjs-redflow/otel`: OpenTelemetry tracing over the engine's tracing interface
 *   lib/health/               `nestjs-redflow/health`: the Terminus indicator over a framework-free check
 *   lib/metrics/              `nestjs-redflow/metrics`: prom-client metrics as worker hooks (core.ts, Nest-free:
 *                             `nestjs-redflow/core/metrics`) and RedflowMetricsModule
 *   lib/testing/              `nestjs-redflow/testing`: test engines on a real Redis (core.ts, Nest-free:
 *                             `nestjs-redflow/core/testing`; nest/: RedflowTestingModule)
 *
 * Layers import downward only: errors ← definition ← store ← client ← worker, then dashboard, then
 * nest and cli on top. Nothing under lib/core imports Nest, class-validator or class-transformer
 * (DTO validation loads them only when a DTO class is given), and there are no import cycles,
 * counting type-only imports.
 */
const layer = (name, below, extra = []) => ({
  name: `${name}-imports-downward`,
  comment: `lib/core/${name} may import only from the layers below it.`,
  severity: 'error',
  from: { path: `^lib/core/${name}/` },
  to: { path: '^lib/', pathNot: [`^lib/core/${name}/`, '^lib/core/errors/', ...below.map((b) => `^lib/core/${b}/`), ...extra] },
});

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      comment: 'Import cycles make load order matter and layers blur.',
      severity: 'error',
      from: { path: '^lib/' },
      to: { circular: true },
    },
    {
      name: 'errors-are-a-leaf',
      comment: 'lib/core/errors/ is imported by every layer, so it imports none of them (only the duration syntax, which imports nothing).',
      severity: 'error',
      from: { path: '^lib/core/errors/' },
      to: { path: '^lib/', pathNot: ['^lib/core/errors/', '^lib/core/definition/duration-format\\.ts$'] },
    },
    layer('definition', []),
    layer('store', ['definition']),
    layer('client', ['definition', 'store']),
    layer('worker', ['definition', 'store', 'client']),
    {
      name: 'redis-through-the-store',
      comment:
        'Only lib/core/store talks to ioredis: the rest opens, watches and closes connections through store/connection.ts and reads and writes through the store (lint rule no-restricted-syntax in eslint.config.mjs catches Redis commands called elsewhere).',
      severity: 'error',
      from: { path: '^lib/', pathNot: ['^lib/core/store/', '^lib/testing/redis-server\\.ts$'] },
      to: { path: '(^|/)node_modules/ioredis/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'core-needs-no-framework',
      comment: 'The engine works in plain Node: no Nest, no class-validator or class-transformer, no dashboard or CLI.',
      severity: 'error',
      from: { path: '^lib/core/' },
      to: {
        path: [
          '^lib/(nest|dashboard|cli|testing|health|metrics)/',
          '(^|/)node_modules/(@nestjs/|class-validator/|class-transformer/|reflect-metadata/|prom-client/)',
        ],
      },
    },
    {
      name: 'dashboard-is-framework-free',
      comment: 'The dashboard serves plain Node requests; the Nest layer adapts it, not the other way round.',
      severity: 'error',
      from: { path: '^lib/dashboard/' },
      to: { path: ['^lib/(nest|cli|testing)/', '(^|/)node_modules/@nestjs/'] },
    },
    {
      name: 'plain-testing-needs-no-nest',
      comment: '`nestjs-redflow/core/testing` (lib/testing outside nest/ and index.ts) works in plain Node; only lib/testing/nest loads Nest.',
      severity: 'error',
      from: { path: '^lib/testing/', pathNot: ['^lib/testing/nest/', '^lib/testing/index\\.ts$'] },
      to: { path: ['^lib/(nest|testing/nest)/', '^lib/testing/index\\.ts$', '(^|/)node_modules/@nestjs/'] },
    },
    {
      name: 'microservices-only-in-its-entry',
      comment: '`nestjs-redflow` must load without the optional peer @nestjs/microservices: only lib/microservice (its own entry) may import it.',
      severity: 'error',
      from: { pathNot: '^lib/microservice/' },
      to: { path: ['^lib/microservice/', '(^|/)node_modules/@nestjs/microservices/'] },
    },
    {
      name: 'opentelemetry-only-in-otel',
      comment: '@opentelemetry/api is an optional peer: only `nestjs-redflow/otel` (lib/otel) loads it; the engine knows only its own tracing interface.',
      severity: 'error',
      from: { path: '^lib/', pathNot: '^lib/otel/' },
      to: { path: '(^|/)node_modules/@opentelemetry/' },
    },
    {
      name: 'otel-builds-on-core-only',
      comment: 'The OpenTelemetry integration implements the engine interface; it needs no Nest, dashboard, CLI or testing code.',
      severity: 'error',
      from: { path: '^lib/otel/' },
      to: { path: ['^lib/(nest|dashboard|cli|testing)/', '(^|/)node_modules/@nestjs/'] },
    },
    {
      name: 'plain-metrics-needs-no-nest',
      comment:
        '`nestjs-redflow/core/metrics` (lib/metrics/core.ts and what it loads) works in plain Node with prom-client; only the module, service and controller load Nest.',
      severity: 'error',
      from: { path: '^lib/metrics/(core|redflow-metrics|prom-client-peer)\\.ts$' },
      to: {
        path: [
          '^lib/(nest|dashboard|cli|testing|health)/',
          '^lib/metrics/redflow-metrics\\.(module|service|controller|module-definition)\\.ts$',
          '(^|/)node_modules/@nestjs/',
        ],
      },
    },
    {
      name: 'health-check-is-framework-free',
      comment: 'The health check itself (checkRedflowHealth) reads the engine only; the Terminus indicator adapts it.',
      severity: 'error',
      from: { path: '^lib/health/redflow-health\\.check\\.ts$' },
      to: { path: ['^lib/(nest|dashboard|cli|testing|metrics)/', '(^|/)node_modules/@nestjs/'] },
    },
    {
      name: 'cli-needs-no-nest',
      severity: 'error',
      from: { path: '^lib/cli/' },
      to: { path: ['^lib/nest/', '(^|/)node_modules/@nestjs/'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.(lua|css|html)$' },
  },
};
