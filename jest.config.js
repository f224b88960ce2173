/** Jest runs TypeScript (and Nest 12's ESM) through SWC; type-checking is `npm run typecheck`. */
const transform = {
  '^.+\\.(t|j)s$': [
    '@swc/jest',
    {
      jsc: {
        parser: { syntax: 'typescript', decorators: true },
        transform: { legacyDecorator: true, decoratorMetadata: true },
        keepClassNames: true,
        target: 'es2022',
      },
      module: { type: 'commonjs' },
    },
  ],
};

const project = (displayName, testMatch) => ({
  displayName,
  testMatch,
  transform,
  // Nest 12 and the path-to-regexp under Fastify's middie are ESM-only: SWC compiles them too.
  transformIgnorePatterns: ['/node_modules/(?!@nestjs/|path-to-regexp/|@fastify/middie/node_modules/path-to-regexp/)'],
  testEnvironment: 'node',
});

module.exports = {
  // One project per test folder, named after it: `jest --selectProjects <folder>` runs that folder.
  projects: ['unit', 'engine', 'edges', 'nest', 'sample', 'package', 'dashboard', 'cli', 'browser'].map((folder) =>
    project(folder, [`<rootDir>/test/${folder}/**/*.spec.ts`]),
  ),
  globalSetup: '<rootDir>/test/setup/global-setup.js',
  globalTeardown: '<rootDir>/test/setup/global-teardown.js',
  testTimeout: 30_000,
};
