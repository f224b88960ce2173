import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**', 'lib/dashboard/assets/app.js'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: {
      globals: {
        process: 'readonly',
        console: 'readonly',
        Buffer: 'readonly',
        __dirname: 'readonly',
        require: 'readonly',
        module: 'writable',
        setTimeout: 'readonly',
        clearTimeout: 'readonly',
        setImmediate: 'readonly',
        globalThis: 'readonly',
      },
    },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
      'no-console': 'error',
    },
  },
  {
    files: [
      'lib/core/definition/workflow.ts',
      'lib/core/definition/workflow-types.ts',
      'lib/core/definition/flow-options.ts',
      'lib/core/definition/step-types.ts',
    ],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  // The dashboard page: browser code (bundled into lib/dashboard/assets/app.js by scripts/build-ui.js).
  {
    files: ['lib/dashboard/ui/**/*.{ts,tsx}'],
    languageOptions: {
      globals: {
        window: 'readonly',
        document: 'readonly',
        location: 'readonly',
        localStorage: 'readonly',
        fetch: 'readonly',
        FormData: 'readonly',
        URLSearchParams: 'readonly',
        Event: 'readonly',
        HTMLElement: 'readonly',
        HTMLFormElement: 'readonly',
        HTMLMetaElement: 'readonly',
        HTMLSelectElement: 'readonly',
        RequestInit: 'readonly',
        Response: 'readonly',
        preact: 'readonly',
      },
    },
  },
  { files: ['test/**', 'bench/**', 'sample/**', 'scripts/**'], rules: { 'no-console': 'off' } },
  // The key layout is known in lib/core/store only: elsewhere a connection is opened, watched and
  // closed, and every read and write goes through the store (its scripts and query classes).
  {
    files: ['lib/**/*.ts'],
    ignores: ['lib/core/store/**', 'lib/testing/redis-server.ts'],
    rules: {
      'no-restricted-syntax': [
        'error',
        ...['callee.object.name', 'callee.object.property.name'].map((path) => ({
          selector: `CallExpression[${path}=/^(redis|connection|subscriber)$/]:not([callee.property.name=/^(on|once|off|disconnect|quit|duplicate|nodes|removeListener|removeAllListeners|connect|ping|subscribe|unsubscribe)$/])`,
          message:
            'Redis is read and written through lib/core/store (a script of RedisScripts, or a method of RunQueries, RunListQueries or RegistryQueries), so that the key layout is known in one place.',
        })),
      ],
    },
  },
);
