import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', __dirname: 'readonly', require: 'readonly', module: 'writable', setTimeout: 'readonly', clearTimeout: 'readonly', setImmediate: 'readonly', globalThis: 'readonly' } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-require-imports': 'off',
      'no-console': 'error',
    },
  },
  { files: ['lib/core/definition/workflow.ts', 'lib/core/definition/workflow-types.ts', 'lib/core/definition/step-types.ts'], rules: { '@typescript-eslint/no-explicit-any': 'off' } },
  {
    files: ['lib/dashboard/assets/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { window: 'readonly', document: 'readonly', location: 'readonly', fetch: 'readonly', URLSearchParams: 'readonly', Node: 'readonly', HTMLSelectElement: 'readonly', clearTimeout: 'readonly', setTimeout: 'readonly' } },
  },
  { files: ['test/**', 'bench/**', 'sample/**', 'scripts/**'], rules: { 'no-console': 'off' } },
);
